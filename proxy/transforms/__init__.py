"""Pure rewrites: a request on its way up (`request/`) and the answer's chunks on their
way back (`response/`). Must not: do I/O, read settings, the clock or the environment,
or mutate their input."""

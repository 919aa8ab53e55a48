"""What /api/show says about a model's window (docs/backends.md 1b)."""

from __future__ import annotations

from proxy.backends.ollama import parse_show


def test_context_length_of_the_architecture_and_the_modelfile_num_ctx() -> None:
    found = parse_show({"model_info": {"general.architecture": "qwen3",
                                       "qwen3.context_length": 40960,
                                       "qwen3.embedding_length": 4096},
                        "parameters": 'num_ctx                        16384\nstop "<|im_end|>"'})
    assert (found.maximum, found.modelfile_ctx) == (40960, 16384)


def test_missing_or_odd_answers_know_nothing() -> None:
    assert parse_show(None).maximum is None
    assert parse_show({"model_info": {}}).modelfile_ctx is None
    guessed = parse_show({"model_info": {"llama.context_length": 131072}})
    assert guessed.maximum == 131072

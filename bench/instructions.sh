#!/usr/bin/env bash
# Instructions the proxy executes per request, counted by valgrind's callgrind:
# deterministic to ~1% where CPU time on a shared VM wanders by 30%, so a small
# change's effect shows in one pair of runs. Counts user-space instructions only
# (no syscalls, no cache misses): confirm a change with bench/run.py --compare.
#
#   bench/instructions.sh N MODEL [load.py flags...]
#   bench/instructions.sh 1000 bench-small --tools -c 8          # W1
#   bench/instructions.sh 300 bench-chunks-64 --stream -c 8      # W2
#   SRC=/path/to/other/checkout bench/instructions.sh ...        # the same for another tree
#   FLOOR=1 bench/instructions.sh ...   # the floor forwarder instead of toolshim
#   WARM=20 bench/instructions.sh ...   # warm-up requests before counting (default 300)
#   KEEP=/tmp/cg bench/instructions.sh ...  # keep callgrind's files there (callgrind_annotate)
#
# Needs valgrind (apt-get install valgrind). The proxy runs under callgrind with
# counting off; WARM requests (300) warm it up, then N are counted.
set -euo pipefail
N=$1; shift; MODEL=$1; shift
HERE="$(cd "$(dirname "$0")" && pwd)"
PY=${PYTHON:-python}
SRC=${SRC:-$(dirname "$HERE")}
TMP=$(mktemp -d)
FAKE_PORT=${FAKE_PORT:-18441}; PROXY_PORT=${PROXY_PORT:-18442}
printf 'version: 1\nmodels:\n  "bench-*":\n    tools: native\n  "bench-native-*":\n    num_ctx: 8192\n' \
  > "$TMP/caps.yaml"
cd "$SRC"
"$PY" "$HERE/fake_upstream.py" --port "$FAKE_PORT" >"$TMP/fake.log" 2>&1 &
FAKE=$!
if [ -n "${FLOOR:-}" ]; then  # the floor forwarder (bench/README.md), for its own count
  SERVE=("$HERE/_floor_forwarder.py" --port "$PROXY_PORT")
else
  SERVE=(-m proxy --host 127.0.0.1 --port "$PROXY_PORT" --capabilities "$TMP/caps.yaml")
fi
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$TMP/cg.%p" \
  "$PY" "${SERVE[@]}" --upstream "http://127.0.0.1:$FAKE_PORT" >"$TMP/proxy.log" 2>&1 &
PROXY=$!
trap 'kill $PROXY $FAKE 2>/dev/null || true; [ -n "${KEEP:-}" ] && cp "$TMP"/cg.* "$KEEP"/ ; rm -rf "$TMP"' EXIT
for _ in $(seq 1 600); do  # valgrind starts python slowly on a busy machine
  curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/healthz" && break; sleep 1
done
URL="http://127.0.0.1:$PROXY_PORT"
"$PY" "$HERE/load.py" "$URL" --model "$MODEL" -n "${WARM:-300}" -d 300 "$@" >/dev/null
callgrind_control -i on "$PROXY" >/dev/null 2>&1
COUNTED=$("$PY" "$HERE/load.py" "$URL" --model "$MODEL" -n "$N" -d 600 "$@")
echo "$COUNTED" | grep -E '"(completed|errors)"'
if ! echo "$COUNTED" | grep -q '"errors": 0,'; then  # a count over failed requests means nothing
  echo "instructions: not counted: requests failed ($(echo "$COUNTED" | grep first_error))" >&2
  exit 1
fi
callgrind_control -i off "$PROXY" >/dev/null 2>&1
callgrind_control -d "$PROXY" >/dev/null 2>&1
sleep 1
IR=$(grep -h "^summary:\|^totals:" "$TMP"/cg.* | awk '{s+=$2} END {print s}')
echo "instructions: $IR in all, $((IR / N)) per request ($N requests, $MODEL $*)"

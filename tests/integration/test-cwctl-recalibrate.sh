#!/usr/bin/env bash
# Description: recalibrating a disk that carries streams, against
# clockwised with disks that keep the Atlas-II's time while admission is
# told they are hdd7200s: a stream admitted at the largest rate the
# hdd7200 allows no longer fits the measured model, so the model is refused
# with a sentence naming that reservation, and admission keeps the old
# one; with a stream that fits both, the model is installed, the stream
# stays, and the reply says the measurement ran beside it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq truncate

ctl_start "$cw_tmp" --emulate atlas2 --model hdd7200
cwctl part create rt --size 64M --policy single --disk hdd0 >/dev/null
model() { cwctl --json disk list | jq -c '.[] | select(.name == "hdd0") | .model'; }
before=$(model)
max=$(cwctl --json disk headroom hdd0 --block 1M | jq '.partitions[] | select(.part == "rt") | .max_rate')
check "a largest rate on rt ($max B/s)" test "$max" -gt 0
id=$(cwctl --json resv create rt --rate "$max" --block 1M | jq .id)
check "a stream at it is admitted" test "$id" -ge 1

out=$(cwctl disk calibrate hdd0 --quick 2>&1)
check "the measured model is refused, naming the stream" bash -c \
	'grep -q "^cwctl disk calibrate: the model measured on hdd0 is not installed (the one admission uses stays): with it, .*reservation $1" <<<"$0"' \
	"$out" "$id"
check "... as refused" bash -c 'grep -q "(refused)$" <<<"$0"' "$out"
json=$(cwctl --json disk calibrate hdd0 --quick 2>&1 >/dev/null | tail -n1)
check "--json: the reservation in the details" test "$(jq .details.resv <<<"$json")" = "$id"
check "admission kept its model" test "$(model)" = "$before"
check "the stream is still admitted" test "$(cwctl --json resv list | jq length)" -eq 1

check "release it" cwctl resv release "$id"
id=$(cwctl --json resv create rt --rate $((max / 4)) --block 1M | jq .id)
check "a quarter of it is admitted" test "$id" -ge 1
out=$(cwctl disk calibrate hdd0 --quick 2>&1)
check "with a stream that fits: installed" test "$(model | jq .calibrated)" = true
check "the reply says the streams ran beside it" bash -c \
	'grep -q "warning: hdd0: the disk carries 1 stream reservation part: the measurement.s reads ran beside it" <<<"$0"' "$out"
check "the stream stayed" test "$(cwctl --json resv show "$id" | jq .id)" = "$id"
check "the data path runs the new model" grep -q "disk hdd0: new model: " "$CTL_LOG"
check "the server stops cleanly" ctl_stop

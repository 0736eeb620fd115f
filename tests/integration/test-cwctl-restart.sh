#!/usr/bin/env bash
# Description: reservations, exports and calibrated disk models outlive the
# control server.  A server over a real pool is given reservations up to
# the point where admission refuses, exports (one bound to a reservation),
# and a calibrated model; it is stopped and a new one started over the same
# pool.  The real cwctl then sees the same reservations (per-disk tasks
# included), exports and models, the same refusal for the same request,
# the same rules (a bound reservation is busy, an exported partition
# cannot go), and new reservation ids that do not reuse old ones.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq truncate

d=$cw_tmp
ctl_start "$d" --no-export-all
check "three disks added" ctl_disks "$d"
check "part create media" cwctl part create media --size 200M
check "part create be" cwctl part create be --size 64M --tier ssd --tier-fallback --policy single
check "calibrate hdd0" cwctl disk calibrate hdd0 --quick
check "reservation 1" test "$(cwctl --json resv create media --rate 8Mbit --block 1M | jq .id)" = 1
check "reservation 2, an hour from a second on" test "$(cwctl --json resv create media \
	--rate 817KB/s --block 64K --range 0:10M --start 1s --duration 1h | jq .id)" = 2
check "a reservation on partition be" cwctl resv create be --rate 1MB/s --block 1M
n=0
while cwctl resv create media --rate 20MB/s --block 1M >/dev/null 2>&1; do
	n=$((n + 1)); [ $n -lt 50 ] || break
done
check "admission refuses before 50 streams" test $n -lt 50
refusal() {
	cwctl --json resv create media --rate 20MB/s --block 1M 2>&1 >/dev/null |
		jq -c '{code, disk: .details.disk, condition: .details.condition}'
}
before_refusal=$(refusal)
check "the refusal names disk and condition" bash -c 'echo "$0" | jq -e ".code == \"refused\" and .disk != null and .condition != null"' "$before_refusal"
check "export bound to reservation 1" cwctl export add media --resv 1
check "a read-only export" cwctl export add be --name be-ro --readonly

# What must survive; the times are relative to now and checked apart.
resvs() {
	local r
	for r in $(cwctl --json resv list | jq '.[].id'); do
		cwctl --json resv show "$r" | jq -c 'del(.starts_in_ns, .ends_in_ns)'
	done
}
exports() { cwctl --json export list | jq -cS "sort_by(.name)"; }
models() { cwctl --json disk list | jq -cS '[.[] | {name, model}]'; }
before_resvs=$(resvs)
before_exports=$(exports)
before_models=$(models)
before_status=$(cwctl --json status | jq -cS '[.disks[] | {name, utilization, delta_l_ns}]')
check "there is something to keep" test "$(echo "$before_resvs" | wc -l)" -eq $((n + 3))

check "the server stops" ctl_stop
ctl_start "$d" --no-export-all

check "the reservations are back, per-disk tasks included" test "$(resvs)" = "$before_resvs"
check "the exports are back" test "$(exports)" = "$before_exports"
check "the calibrated model is back" test "$(models)" = "$before_models"
check "hdd0's model is still the calibrated one" test "$(cwctl --json disk list | jq '.[] | select(.name == "hdd0") | .model.calibrated')" = true
check "utilization and delta-L per disk are the same" test \
	"$(cwctl --json status | jq -cS '[.disks[] | {name, utilization, delta_l_ns}]')" = "$before_status"
ends=$(cwctl --json resv show 2 | jq .ends_in_ns)
check "reservation 2 still ends within the hour" test "$ends" -gt 0 -a "$ends" -le 3601000000000
check "the same request gets the same refusal" test "$(refusal)" = "$before_refusal"
check "a bound reservation is still busy" test "$(ctl_code cwctl resv release 1)" = busy
check "an exported partition still cannot go" test "$(ctl_code cwctl part delete media)" = busy
check "export remove media" cwctl export remove media
check "release reservation 1" cwctl resv release 1
top=$(echo "$before_resvs" | jq -s 'map(.id) | max')
new=$(cwctl --json resv create media --rate 1MB/s --block 1M | jq .id)
check "a new id is past every old one" test "$new" -gt "$top"

# And once more: what was removed stays removed.
check "the server stops again" ctl_stop
ctl_start "$d" --no-export-all
check "reservation 1 stays released" test "$(ctl_code cwctl resv show 1)" = not-found
check "export media stays removed" test "$(cwctl --json export list | jq -r '[.[].name] | join(",")')" = be-ro
check "the new reservation is there" test "$(cwctl --json resv show "$new" | jq .id)" = "$new"
check "the server stops cleanly" ctl_stop

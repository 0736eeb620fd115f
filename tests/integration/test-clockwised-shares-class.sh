#!/bin/bash
# Description: a connection class within an export is a best-effort client
# of its own.  Clients that open "media@backup" share the class's QoS
# (weight 1, from clockwised.conf) while those that open "media" share the
# export's (weight 4): two fio clients on the one export then get 1:4 of
# the disk, where without the class they would split it evenly; a class
# set at run time with `cwctl export qos media@batch` takes effect for new
# connections; a class without a QoS of its own is the export's; `cwctl
# stats` shows each class; a bad class name is refused.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires fio jq
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "SKIP: fio lacks the nbd engine"; exit 77; }
cwctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }

check "pool" cwd_pool 160M a
check "partition" cwd_part media 96M single
# The disk emulates a 7200 rpm drive, so that it, not the clients (a
# sanitized daemon, a loaded host), is the bottleneck the weights share.
cwd_conf "be_order = \"rbfq\"; queue_depth = 2;
disks = ( { path = \"$cw_tmp/a.disk\"; name = \"a\"; emulate = \"hdd7200\"; } );
exports = { all = true; qos = ( { name = \"media\"; weight = 4; },
                    { name = \"media@backup\"; weight = 1; } ); };"
check "start" cwd_start
check "fill" env -C "$cw_tmp" fio --name=fill --ioengine=nbd --uri="$(cwd_uri media)" \
	--rw=write --bs=1M --size=96M --output=/dev/null

# Two clients at once, 256 KiB random reads, 16 in flight each, as the
# names $1 and $2 (export names, with a class or not); prints
# "bytes1 bytes2".
two() {
	env -C "$cw_tmp" fio --ioengine=nbd --rw=randread --bs=256k --iodepth=16 --size=96M \
		--time_based --runtime=4 --output-format=terse --terse-version=3 \
		--name=one --uri="$(cwd_uri "$1")" --name=two --uri="$(cwd_uri "$2")" |
		awk -F';' '$9 > 0 { printf "%.0f ", $6 * 1024 } END { print "" }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b / a }'; }

read -r backup plain <<<"$(two media@backup media)"
echo "media@backup=$backup media=$plain: $(ratio "$backup" "$plain")x"
# 4x in the fluid model; the reads in flight at either end blur it
check "the class gets its weight: the export 2.5x or more of it" \
	test $((plain * 2)) -gt $((5 * backup))
read -r other plain2 <<<"$(two media@other media)"
echo "media@other=$other media=$plain2: $(ratio "$other" "$plain2")x"
check "a class without a QoS of its own is the export's: an even split" \
	awk -v r="$(ratio "$other" "$plain2")" 'BEGIN { exit !(r > 0.6 && r < 1.6) }'
cwctl --json stats | jq -c '.exports[] | [.export, .requests]'
check "stats shows the class" test "$(cwctl --json stats |
	jq -r '[.exports[] | select(.requests > 0) | .export] | sort | join(" ")')" = \
	"media media@backup"

check "a class set at run time" cwctl export qos media@batch --weight 8
read -r batch plain3 <<<"$(two media@batch media)"
echo "media@batch=$batch media=$plain3: $(ratio "$batch" "$plain3")x"
check "  takes effect: weight 8 gets more than the export's 4" \
	test $((batch * 10)) -gt $((plain3 * 15))
check "  and shows it" test "$(cwctl --json export qos media@batch | jq .weight)" = 8
out=$(cwctl export qos media@-bad --weight 2 2>&1); rc=$?
check "a bad class name is refused" test $rc -ne 0
check "  and says so" grep -q "is not an export name" <<<"$out"
expect_fail "a class of an unknown export" cwctl export qos nosuch@x --weight 2
check "stop" cwd_stop

#!/bin/bash
# Description: clockwised exports every partition with its size and block
# sizes; bad options and a bad configuration stop it with a clear message.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires nbdinfo jq

check "pool with two disks" cwd_pool 64M a b:ssd
check "a striped partition" cwd_part vol 40M rotation
check "a partition on disk 2" cwd_part solo 8M single 2
cwd_conf 'exports = { all = true; block_size = 8192; max_request_bytes = 4194304; };'

check "--help" bash -c "'$cwd_bin' --help | grep -q -- --config"
check "--version" bash -c "'$cwd_bin' --version | grep -q '^clockwised '"
expect_fail "an unknown option" "$cwd_bin" --bogus
echo 'bogus_key = 1;' >"$cw_tmp/bad.conf"
expect_fail "an unknown key" "$cwd_bin" -f -c "$cw_tmp/bad.conf"
check "the message names file and line" bash -c \
	"'$cwd_bin' -f -c '$cw_tmp/bad.conf' 2>&1 | grep -q 'bad.conf:1:'"
expect_fail "a malformed reservation" "$cwd_bin" -f -c "$cwd_cfg" -r vol:fast:1M

cwd_start
nbdinfo --list --json "nbd+unix:///?socket=$cwd_sock" >"$cw_tmp/list.json"
check "two exports" test "$(jq '.exports | length' "$cw_tmp/list.json")" -eq 2
size_of() { jq ".exports[] | select(.\"export-name\" == \"$1\") | .\"export-size\"" "$cw_tmp/list.json"; }
field_of() { jq ".exports[] | select(.\"export-name\" == \"$1\") | .\"$2\"" "$cw_tmp/list.json"; }
check "vol is 40 MiB" test "$(size_of vol)" -eq $((40 << 20))
check "solo is 8 MiB" test "$(size_of solo)" -eq $((8 << 20))
check "preferred block size from the config" test "$(field_of vol block_size_preferred)" -eq 8192
check "maximum block size from the config" test "$(field_of vol block_size_maximum)" -eq 4194304
check "minimum block size is the disks' alignment" \
	bash -c "m=$(field_of vol block_size_minimum); [ \$m -ge 512 ] && [ \$((m & (m - 1))) -eq 0 ]"
check "vol can flush and fua" test "$(field_of vol can_fua)" = true
check "multi-conn advertised" test "$(field_of vol can_multi_conn)" = true
check "an HDD export is rotational" test "$(field_of vol is_rotational)" = true
check "an SSD-only export is not" test "$(field_of solo is_rotational)" = false
check "clean stop on SIGTERM" cwd_stop
check "the counters are logged at exit" grep -q 'stats disk a lane 0' "$(cwd_log)"

# A reservation the disk cannot carry is refused with the reason.
cwd_run=$((cwd_run + 1))
expect_fail "an impossible reservation stops the start" \
	"$cwd_bin" -f -c "$cwd_cfg" -r vol:1G:1M
check "the refusal is explained" bash -c \
	"'$cwd_bin' -f -c '$cwd_cfg' -r vol:1G:1M 2>&1 | grep -q 'refused'"

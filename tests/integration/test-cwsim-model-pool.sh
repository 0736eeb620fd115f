#!/usr/bin/env bash
# Description: `model = pool:DB:DISK` loads the model `cwctl disk
# calibrate` stored in a pool database, read-only and beside the running
# server that holds the pool: the runs equal those of the same model as a
# preset; an unknown disk, a disk without a stored model and a file that
# is no pool are refused with a clear error; the pool is left usable.
# (The stand-in control server, for its --calibrate-preset: calibrating a
# sparse file measures the page cache, not a disk.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires truncate

cwsim=$top_builddir/tools/cwsim
d=$cw_tmp
ctl_start_standin "$d" --calibrate-preset atlas2
truncate -s 256M "$d/a.img" "$d/b.img"
check "disk a added" cwctl disk add "$d/a.img" --name a
check "disk b added" cwctl disk add "$d/b.img" --name b
check "calibrate a (stores atlas2 as a's model)" cwctl disk calibrate a

run_to() {	# FILE ARGS...: cwsim run --json ARGS into FILE
	local f=$1
	shift
	"$cwsim" run --json --preset quick --set placement=rotation --set duration_s=20 "$@" \
		>"$f" 2>"$f.err"
}
check "preset run" run_to "$d/preset" --set model=atlas2
check "pool run beside the running server" run_to "$d/pool" --set "model=pool:$d/pool.db:a"
check "same results from the pool" cmp -s "$d/preset" "$d/pool"
expect_fail "an unknown disk is refused" run_to "$d/x" --set "model=pool:$d/pool.db:nope"
check "and says so" grep -q "no disk named 'nope'" "$d/x.err"
expect_fail "a disk without a model is refused" run_to "$d/y" --set "model=pool:$d/pool.db:b"
check "and says so" grep -q "has no stored model" "$d/y.err"
expect_fail "a file that is no pool is refused" run_to "$d/z" --set "model=pool:$d/a.img:a"
expect_fail "a malformed spec is refused" run_to "$d/w" --set "model=pool:$d/pool.db"
check "the server still serves the pool" cwctl disk list
check "the server stops cleanly" ctl_stop
check "pool run with no server" run_to "$d/pool2" --set "model=pool:$d/pool.db:a"
check "same results again" cmp -s "$d/preset" "$d/pool2"

# perf-parts.awk — put each sample of `perf script -F comm,tid,ip,sym,dso`
# down to a part of an NBD request's path, and print the parts.
#
# A sample's part is that of its innermost frame that names one: the
# kernel's frames all (their chain is exact), then the first user-space
# frame only (the servers are built without frame pointers, so the user
# chain past the sampled function is not to be trusted).  A user-space
# function is put down by the source file it comes from (the file FMAP,
# lines "FUNCTION FILE" from `nm -l`), libc's and liburing's by name.
# Threads whose name matches SKIP (the stall probes) are counted apart:
# they are not the requests' work.
#
#   perf script ... | awk -f perf-parts.awk -v fmap=FILE -v skip=REGEX \
#       -v cpu_ms=MS -v ios=N -v title=WORDS
# prints, per part, its share of the samples and, when cpu_ms (the
# server's task-clock over the run) and ios (the requests served) are
# given, its microseconds per request.
BEGIN {
	nparts = split("receive parse map book dispatch disk copy reply wake-up switch " \
		       "syscall alloc clock sync kernel-other user-other", order, " ")
	while (fmap != "" && (getline line < fmap) > 0) {
		split(line, f, " ")
		file[f[1]] = f[2]
	}
}

function by_file(path) {
	if (path ~ /\/nbd\/(input|connections|sockets|slots)\.c$/) return "receive"
	if (path ~ /\/proto\/nbd\.c$|\/nbd\/(protocol|protocol-unaligned|exports|limits)\.c$/) return "parse"
	if (path ~ /\/slots\/|\/model\//) return "book"
	if (path ~ /\/path\/split\.c$|\/layout\/|\/path\/(submit|preq|pool-backend|pool-export|pool-alloc)\.c$/)
		return "map"
	if (path ~ /\/sched\/|\/path\/lane[a-z-]*\.c$|\/path\/pool-disk\.c$|\/path\/lane\.c$/) return "dispatch"
	if (path ~ /\/io\//) return "disk"
	if (path ~ /\/nbd\/(protocol-reply|nbd-server)\.c$/) return "reply"
	return ""
}

function user_part(sym) {
	if (sym ~ /^(lane_push|lane_push_thick|rt_booking|lane_booked)$/) return "book"
	if (sym in file) { p = by_file(file[sym]); if (p != "") return p }
	if (sym ~ /^(__libc_recv|recv|__recv|recvmsg|__libc_recvmsg|__libc_read|read|__read|readv)$/) return "receive"
	if (sym ~ /^(__libc_pread|pread64|preadv|preadv2|__libc_pwrite|pwrite64|pwritev|pwritev2|fdatasync|io_uring_|__io_uring_|io_submit|io_getevents)/) return "disk"
	if (sym ~ /^(__libc_sendmsg|sendmsg|send|__send|__libc_send|sendto|__sendto|writev|__libc_write|write|__write)$/) return "reply"
	if (sym ~ /^(__memmove|__memcpy|memcpy|memmove|__memset|memset)/) return "copy"
	if (sym ~ /^(malloc|_int_malloc|free|_int_free|cfree|malloc_consolidate|tcache_|calloc|realloc|_int_realloc|__libc_malloc|__libc_free|__libc_calloc|posix_memalign|_mid_memalign|_int_memalign)/) return "alloc"
	if (sym ~ /^(__sched_yield|sched_yield)$/) return "switch"
	if (sym ~ /clock_gettime|clock_nanosleep|__vdso_/) return "clock"
	if (sym ~ /^(pthread_|__pthread_|__lll_|syscall$|__GI___lll)/) return "sync"
	return ""
}

function kernel_part(sym) {
	if (sym ~ /^(_copy_to_iter|_copy_from_iter|copy_user_|rep_movs|copy_page_to_iter|copy_page_from_iter|memcpy|__memcpy|memmove|__memmove|copyout|copyin|skb_copy_datagram_iter)/) return "copy"
	if (sym ~ /^(try_to_wake_up|wake_up_q|futex_wake|__wake_up|wake_up_process|ttwu_|sched_ttwu|wake_q_)/) return "wake-up"
	if (sym ~ /^(__schedule|schedule$|schedule_|finish_task_switch|do_sched_yield|futex_wait|__futex_wait|do_nanosleep|hrtimer_nanosleep|pick_next_task|__x64_sys_sched_yield)/) return "switch"
	if (sym ~ /^(unix_stream_recvmsg|unix_stream_read_generic|__sys_recvfrom|__sys_recvmsg|___sys_recvmsg|____sys_recvmsg|sock_recvmsg|tcp_recvmsg|__x64_sys_recvfrom|__x64_sys_recvmsg)/) return "receive"
	if (sym ~ /^(unix_stream_sendmsg|__sys_sendmsg|___sys_sendmsg|____sys_sendmsg|sock_sendmsg|tcp_sendmsg|__sys_sendto|__x64_sys_sendmsg|__x64_sys_sendto|sock_write_iter)/) return "reply"
	if (sym ~ /^(io_|__io_|vfs_read|vfs_write|ksys_pread64|ksys_pwrite64|__x64_sys_pread64|__x64_sys_pwrite64|shmem_|filemap_|generic_file_|ext4_|xfs_|iomap_|blk|__blk|submit_bio|xas_)/) return "disk"
	if (sym ~ /^(do_syscall_64|entry_SYSCALL|syscall_exit|exit_to_user_mode|syscall_return|__x64_sys_|__do_sys_|fdget|__fdget|fput)/) return "syscall"
	return ""
}

function flush_sample(   i, p, kernel_seen) {
	if (!nf)
		return
	p = ""
	for (i = 1; i <= nf && p == ""; i++) {
		if (dso[i] ~ /kernel/) {
			p = kernel_part(sym[i])
			kernel_seen = 1
		} else {
			p = user_part(sym[i])
			break	# past the first user frame the chain is unreliable
		}
	}
	if (p == "")
		p = kernel_seen ? "kernel-other" : "user-other"
	if (skipped)
		n_skip++
	else {
		n[p]++
		total++
		if (p ~ /other/)
			miss[sym[1]]++
	}
	nf = 0
}

/^[^ \t]/ {
	flush_sample()
	skipped = skip != "" && $1 ~ skip
	next
}
/^[ \t]+[0-9a-f]+ / {
	nf++
	line = $0
	sub(/^[ \t]+[0-9a-f]+ /, "", line)
	d = line
	sub(/^.* \(/, "", d)
	sub(/\)$/, "", d)
	s = line
	sub(/ \([^(]*\)$/, "", s)
	sub(/\+0x[0-9a-f]+$/, "", s)
	sym[nf] = s
	dso[nf] = d
	next
}
/^$/ { flush_sample() }

END {
	flush_sample()
	if (!total) {
		printf "%s: no samples\n", title
		exit 1
	}
	per = cpu_ms > 0 && ios > 0 ? cpu_ms * 1000 / ios : 0
	printf "%s: %d samples", title, total
	if (per)
		printf ", %.2f us of the server's CPU per request", per
	if (n_skip)
		printf " (%d more in the stall probes, left out)", n_skip
	printf "\n  %-13s %7s %9s\n", "part", "share", "us/req"
	for (i = 1; i <= nparts; i++) {
		p = order[i]
		if (!n[p])
			continue
		printf "  %-13s %6.1f%%", p, 100 * n[p] / total
		if (per)
			printf " %9.2f", per * n[p] / total
		printf "\n"
	}
	# the functions left in "other", largest first (five), to name them
	shown = 0
	for (k = 0; k < 5; k++) {
		best = ""
		for (s in miss)
			if (!(s in done) && (best == "" || miss[s] > miss[best]))
				best = s
		if (best == "")
			break
		done[best] = 1
		printf "%s %s (%.1f%%)", shown++ ? "," : "  largest in the others:", best,
			100 * miss[best] / total
	}
	if (shown)
		printf "\n"
}

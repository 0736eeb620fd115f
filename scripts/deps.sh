# Sourced by scripts/check, scripts/quickstart and .ci/run: the Debian
# packages Clockwise builds and tests with, in two lists.
#
# CW_DEB_BUILD: what building (configure requires each; librbd-dev and
# librados-dev give disks on a Ceph cluster, the client libraries only)
# and the quick start need (nbdcopy and nbdinfo, qemu-img, fio, jq).
# CW_DEB_TEST: what only some tests need: a Ceph cluster of their own
# (ceph-mon, ceph-osd), nbdkit, QEMU's FUSE export, systemd, TLS tools,
# Prometheus and gnuplot; and the QEMU guest of tests/vm/ (QEMU, Debian's
# kernel, busybox-static and cpio for its initramfs, and what runs in it:
# the kernel's NBD client, xfsprogs, LVM, dmsetup and mdadm; apt, dpkg, kmod and
# debian-archive-keyring for tests/vm/kernel-bpo, which fetches the
# backports kernel with ublk_drv into the build tree).  scripts/check
# installs both.
CW_DEB_BUILD="build-essential autoconf automake libtool pkg-config
 liburing-dev libaio-dev libsqlite3-dev libconfig-dev libcunit1-dev
 libsystemd-dev libjson-c-dev libnbd-dev libgnutls28-dev libmicrohttpd-dev
 librbd-dev librados-dev
 libnbd-bin qemu-utils fio jq procps util-linux"
CW_DEB_TEST="sqlite3 nbdkit e2fsprogs groff-base gnuplot-nox systemd
 qemu-system-common fuse3 python3 gnutls-bin curl prometheus
 ceph-mon ceph-osd ceph-common
 qemu-system-x86 linux-image-amd64 busybox-static cpio nbd-client xfsprogs lvm2 dmsetup mdadm
 apt dpkg kmod debian-archive-keyring xz-utils"
CW_DEB_PACKAGES="$CW_DEB_BUILD $CW_DEB_TEST"

# cw_install_deps [build|all]: installs what is missing of one list (the
# build's and the quick start's) or of both (the default).
cw_install_deps() {
	local missing=() p list=$CW_DEB_PACKAGES
	[ "${1:-all}" = build ] && list=$CW_DEB_BUILD
	for p in $list; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "Installing missing Debian packages: ${missing[*]}"
	local sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq
	# (INITRD=No: the guest's kernel needs no initramfs of the host's making)
	$sudo env DEBIAN_FRONTEND=noninteractive INITRD=No \
		apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

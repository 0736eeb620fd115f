# Sourced by scripts/check and scripts/quickstart: the Debian packages
# Clockwise builds and tests with, installed when missing.
CW_DEB_PACKAGES="build-essential autoconf automake libtool pkg-config
 liburing-dev libaio-dev libsqlite3-dev sqlite3 libconfig-dev libcunit1-dev
 libsystemd-dev libjson-c-dev libnbd-dev libnbd-bin nbdkit qemu-utils fio
 e2fsprogs util-linux procps groff-base gnuplot-nox jq systemd
 qemu-system-common fuse3 python3 libgnutls28-dev gnutls-bin
 libmicrohttpd-dev curl prometheus
 ceph-mon ceph-osd ceph-common librbd-dev librados-dev"

cw_install_deps() {
	local missing=() p
	for p in $CW_DEB_PACKAGES; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "Installing missing Debian packages: ${missing[*]}"
	local sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

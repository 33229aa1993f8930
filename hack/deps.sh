#!/usr/bin/env bash
# Checks that the Debian packages a make target needs are installed, and
# installs the missing ones with apt-get: as root, or through `sudo -n`
# when it needs no password. Otherwise it stops at once and prints the one
# command to run.
#
#   hack/deps.sh [-n] [GROUP|PACKAGE]...
#
# GROUP is `test` (every package the tests need, the default) or `images`
# (what `make images` needs); any other word is a Debian package name.
# -n (--dry-run) prints what it would do and changes nothing.
# METALSHIFT_SKIP_DEPS=1 skips the check (a machine that is not Debian and
# has the tools some other way).
set -euo pipefail

# `make images`: grub-pc-bin, grub-efi-amd64-bin, xorriso and mtools make
# the hybrid live ISO (grub-mkrescue); the kernel is fetched with `apt-get
# download`, so apt's package lists must be there too; ca-certificates go
# into the manager's container image.
images=(grub-pc-bin grub-efi-amd64-bin xorriso mtools ca-certificates)
# The tests: make and git run them; redfishtool, python3-sushy, ipmitool
# and openipmi are the real clients and BMC emulators of the conformance
# tests; qemu-system-x86, ovmf and ipxe-qemu run the QEMU e2e's machines;
# cpio, fdisk (sfdisk) and gdisk (sgdisk) check the initramfs and partition
# tables the code writes; containerd, runc, containernetworking-plugins and
# iproute2 are the real node of TestNode (its kubelet is built by `make
# tools`); bind9 is the real DNS server (named) that the Equinix Metal
# provider's RFC 2136 updates are tested against; chromium is the real
# browser (headless) the web console's TestBrowser drives.
test=(make git "${images[@]}" redfishtool python3-sushy ipmitool openipmi
	qemu-system-x86 ovmf ipxe-qemu cpio fdisk gdisk
	containerd runc containernetworking-plugins iproute2 bind9 chromium)

dry_run=false
wanted=()
lists=false
for arg in "$@"; do
	case "${arg}" in
	-n | --dry-run) dry_run=true ;;
	test) wanted+=("${test[@]}") lists=true ;;
	images) wanted+=("${images[@]}") lists=true ;;
	-*)
		echo "usage: $0 [-n] [test|images|PACKAGE]..." >&2
		exit 2
		;;
	*) wanted+=("${arg}") ;;
	esac
done
if [[ ${#wanted[@]} -eq 0 ]]; then
	wanted=("${test[@]}") lists=true
fi

if [[ "${METALSHIFT_SKIP_DEPS:-}" == 1 ]]; then
	exit 0
fi
if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
	echo "deps: this is not a Debian machine (no dpkg-query or apt-get): install the equivalents of" >&2
	echo "  ${wanted[*]}" >&2
	echo "and run again with METALSHIFT_SKIP_DEPS=1" >&2
	exit 1
fi

missing=()
declare -A seen=()
for p in "${wanted[@]}"; do
	[[ -n "${seen[${p}]:-}" ]] && continue
	seen[${p}]=1
	status=$(dpkg-query -W -f='${db:Status-Status}' "${p}" 2>/dev/null || true)
	[[ "${status}" == installed ]] || missing+=("${p}")
done
# apt's package lists: `apt-get install` and `make images`' `apt-get
# download` need them.
need_update=false
if { [[ ${#missing[@]} -gt 0 ]] || ${lists}; } && ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null; then
	need_update=true
fi
if [[ ${#missing[@]} -eq 0 ]] && ! ${need_update}; then
	${dry_run} && echo "deps: every package is installed: nothing to do"
	exit 0
fi

install=(apt-get install -y -qq --no-install-recommends "${missing[@]}")
commands=()
${need_update} && commands+=("apt-get update -qq")
[[ ${#missing[@]} -gt 0 ]] && commands+=("${install[*]}")

sudo=()
if [[ "$(id -u)" -ne 0 ]]; then
	if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
		sudo=(sudo -n)
	else
		echo "deps: missing Debian packages: ${missing[*]:-none, the package lists are missing}" >&2
		echo "deps: run, then make again:" >&2
		line=""
		for c in "${commands[@]}"; do line+="${line:+ && }sudo ${c}"; done
		echo "  ${line}" >&2
		exit 1
	fi
fi

if [[ ${#missing[@]} -gt 0 ]]; then
	echo "deps: installing the missing Debian packages: ${missing[*]}"
fi
run() {
	echo "deps: ${sudo[*]}${sudo[*]:+ }$*"
	${dry_run} && return 0
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive "$@"
}
${need_update} && run apt-get update -qq
if [[ ${#missing[@]} -gt 0 ]]; then
	# Lists that are there but old name versions the mirror no longer has:
	# update them once and try again.
	if ! run "${install[@]}"; then
		run apt-get update -qq
		run "${install[@]}"
	fi
fi

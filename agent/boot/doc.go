// Package boot is the init of metalshift's live image: when the agent runs
// as PID 1 of the initramfs it mounts the kernel's filesystems, loads the
// kernel modules the image carries (in the order `make images` computed
// from their dependencies), brings up every NIC that has a link with DHCP,
// and then the agent's role runs. ConfigureBond is the metal cloud
// installer's network: a bond of NICs found by MAC, with static addresses
// and routes. Nothing else is in the initramfs: no shell, no udev, no
// busybox.
package boot

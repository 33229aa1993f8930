// Package imageservice holds the boot artifacts metalshift serves to hosts
// and how a host's own data gets into them without a copy per host: the
// live ISO (kernel, initramfs with the agent, GRUB for BIOS and UEFI) has a
// fixed-size region, /boot/host.img, that the server replaces on the fly by
// a small initramfs carrying the host's boot configuration; over iPXE the
// same small initramfs is a second initrd. The bytes are built by
// `make images` (hack/images); serving, signing and access control are the
// caller's: the host engine's deploy server (hostengine/deployserver) serves
// the deploy images, the agent service (assisted/server) the InfraEnvs'
// discovery images.
package imageservice

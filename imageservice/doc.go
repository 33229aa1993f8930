// Package imageservice builds the boot artifacts metalshift serves to
// hosts: the deploy ISO (an ISO 9660 image carrying the deploy agent's boot
// configuration) and the iPXE script that boots the same agent over the
// network. It builds bytes only; serving, signing and access control are the
// caller's (baremetal/deployserver today, the InfraEnv image service later).
package imageservice

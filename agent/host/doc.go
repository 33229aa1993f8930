// Package host reads the machine the agent runs on — its block devices and
// an inventory of CPUs, memory, NICs, disks, system vendor and boot mode —
// from Linux's sysfs and procfs, and opens its disks for the deploy agent.
// It is what a real server or VM gives the agent; the simulator gives it
// synthetic devices through the same deploy.BlockDevice interface. The
// roots of /sys, /proc and /dev are parameters, so tests run it against a
// tree of files.
package host

// Package machine simulates bare-metal machines behind the protocol
// boundary: power, a one-time or persistent boot override, a virtual CD
// drive, NICs, CPUs, memory and disks that hold real bytes. What a machine
// does when it powers on (fetch an ISO, chain-load iPXE, boot its disk) is
// decided by a Firmware the simulator installs; controllers never see this
// package, only the BMC protocols in front of it.
package machine

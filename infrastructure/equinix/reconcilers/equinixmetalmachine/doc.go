// Package equinixmetalmachine reconciles EquinixMetalMachines: a device
// per Machine, booting metalshift's live image by custom iPXE with the
// Machine's bootstrap data as its user data, found again by its tags after
// a restart; its state, providerID and addresses reported; a device that
// fails replaced; the device deleted, and waited for, with the machine.
package equinixmetalmachine

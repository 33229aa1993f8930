//go:build linux

// Command testos is the init of the small OS image `make images` builds
// for the QEMU lab: what a provisioned machine boots from its disk. It
// loads its modules, finds the config drive (the ISO 9660 filesystem
// labelled config-2), mounts it, prints the SHA-256 of
// openstack/latest/user_data on the console and stays up.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metalshift/metalshift/agent/boot"
)

func main() {
	say := func(format string, args ...any) { fmt.Printf("metalshift-testos: "+format+"\n", args...) }
	if err := boot.Mount(); err != nil {
		say("%v", err)
	}
	boot.LoadModules(say)
	var dev string
	for deadline := time.Now().Add(20 * time.Second); dev == "" && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		dev = findConfigDrive()
	}
	if dev == "" {
		say("no config drive (no filesystem labelled config-2)")
	} else if err := report(dev, say); err != nil {
		say("config drive %s: %v", dev, err)
	}
	for {
		time.Sleep(time.Hour)
	}
}

// findConfigDrive returns the block device (disk or partition) whose ISO
// 9660 volume label is config-2, as blkid would find it by label.
func findConfigDrive() string {
	entries, _ := os.ReadDir("/sys/class/block")
	for _, e := range entries {
		dev := "/dev/" + e.Name()
		f, err := os.Open(dev)
		if err != nil {
			continue
		}
		pvd := make([]byte, 72)
		_, err = f.ReadAt(pvd, 16*2048)
		f.Close()
		if err == nil && pvd[0] == 1 && string(pvd[1:6]) == "CD001" && strings.TrimSpace(string(pvd[40:72])) == "config-2" {
			return dev
		}
	}
	return ""
}

func report(dev string, say func(string, ...any)) error {
	if err := os.MkdirAll("/mnt/config", 0o755); err != nil { //nolint:gosec // a mount point
		return err
	}
	if err := unix.Mount(dev, "/mnt/config", "iso9660", unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("mounting: %w", err)
	}
	say("mounted config drive %s", dev)
	data, err := os.ReadFile("/mnt/config/openstack/latest/user_data")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	say("user_data sha256 %s", hex.EncodeToString(sum[:]))
	if meta, err := os.ReadFile("/mnt/config/openstack/latest/meta_data.json"); err == nil {
		say("meta_data.json %s", strings.Join(strings.Fields(string(meta)), " "))
	}
	return nil
}

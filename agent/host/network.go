package host

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// The machine's network facts and identity, as the discovery agent reports
// them: read from sysfs, procfs and the kernel's interfaces.

// MachineUUID is the SMBIOS system UUID, lowercase: the host's ID.
func MachineUUID(paths Paths) (string, error) {
	file := filepath.Join(paths.Sys, "class", "dmi", "id", "product_uuid")
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading the machine's UUID: %w", err)
	}
	id := strings.ToLower(strings.TrimSpace(string(b)))
	if id == "" {
		return "", fmt.Errorf("the machine has no UUID (%s is empty)", file)
	}
	return id, nil
}

// Addresses are an interface's global addresses in CIDR notation.
func Addresses(name string) (v4, v6 []string) {
	v4, v6 = []string{}, []string{}
	itf, err := net.InterfaceByName(name)
	if err != nil {
		return v4, v6
	}
	addrs, _ := itf.Addrs()
	for _, a := range addrs {
		ipnet, ok := a.(*net.IPNet)
		if !ok || ipnet.IP.IsLinkLocalUnicast() || ipnet.IP.IsLoopback() {
			continue
		}
		if ipnet.IP.To4() != nil {
			v4 = append(v4, ipnet.String())
		} else {
			v6 = append(v6, ipnet.String())
		}
	}
	return v4, v6
}

// DefaultRoutes reads the IPv4 and IPv6 default routes from procfs.
func DefaultRoutes(paths Paths) []assistedapi.Route {
	var routes []assistedapi.Route
	// /proc/net/route: Iface Destination Gateway ... in little-endian hex.
	eachLine(filepath.Join(paths.Proc, "net", "route"), func(f []string) {
		if len(f) < 3 || f[1] != "00000000" {
			return
		}
		gw, err := hex.DecodeString(f[2])
		if err != nil || len(gw) != 4 {
			return
		}
		routes = append(routes, assistedapi.Route{Interface: f[0], Destination: "0.0.0.0",
			Gateway: net.IPv4(gw[3], gw[2], gw[1], gw[0]).String(), Family: unix.AF_INET})
	})
	// /proc/net/ipv6_route: dest plen src plen gateway metric refcnt use flags iface.
	eachLine(filepath.Join(paths.Proc, "net", "ipv6_route"), func(f []string) {
		if len(f) < 10 || f[0] != strings.Repeat("0", 32) || f[1] != "00" || f[9] == "lo" {
			return
		}
		gw, err := hex.DecodeString(f[4])
		if err != nil || len(gw) != 16 {
			return
		}
		routes = append(routes, assistedapi.Route{Interface: f[9], Destination: "::", Gateway: net.IP(gw).String(), Family: unix.AF_INET6})
	})
	return routes
}

// eachLine calls f with the fields of each line of file, if it exists.
func eachLine(file string, f func(fields []string)) {
	fh, err := os.Open(file)
	if err != nil {
		return
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		f(strings.Fields(sc.Text()))
	}
}

// NICMACs are the MAC addresses of the machine's network interfaces.
func NICMACs() []string {
	itfs, _ := net.Interfaces()
	var macs []string
	for _, itf := range itfs {
		if len(itf.HardwareAddr) > 0 && itf.Flags&net.FlagLoopback == 0 {
			macs = append(macs, itf.HardwareAddr.String())
		}
	}
	return macs
}

package imageservice

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/kdomanski/iso9660"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// DeployISOLabel is the volume label of deploy ISOs.
const DeployISOLabel = "METALSHIFT_DEPLOY"

// Kernel arguments that carry the boot configuration over iPXE.
const (
	ArgEngine = "metalshift.engine"
	ArgHost   = "metalshift.host"
	ArgToken  = "metalshift.token"
)

// BuildDeployISO returns an ISO 9660 image holding cfg at
// deployapi.BootConfigFile.
func BuildDeployISO(cfg deployapi.BootConfig) ([]byte, error) {
	w, err := iso9660.NewWriter()
	if err != nil {
		return nil, err
	}
	defer w.Cleanup() //nolint:errcheck // removing the staging directory is best effort
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := w.AddFile(bytes.NewReader(data), deployapi.BootConfigFile); err != nil {
		return nil, err
	}
	readme := "metalshift deploy image: boots the deploy agent, which asks " + cfg.EngineURL + " what to do.\n"
	if err := w.AddFile(strings.NewReader(readme), "/README.TXT"); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := w.WriteTo(&buf, DeployISOLabel); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadDeployISO reads the boot configuration from a deploy ISO, as the
// deploy image's init does on boot.
func ReadDeployISO(iso io.ReaderAt) (deployapi.BootConfig, error) {
	var cfg deployapi.BootConfig
	img, err := iso9660.OpenImage(iso)
	if err != nil {
		return cfg, fmt.Errorf("not an ISO 9660 image: %w", err)
	}
	f, err := img.RootDir()
	if err != nil {
		return cfg, err
	}
	for _, part := range strings.Split(strings.Trim(deployapi.BootConfigFile, "/"), "/") {
		if f, err = child(f, part); err != nil {
			return cfg, err
		}
	}
	data, err := io.ReadAll(f.Reader())
	if err != nil {
		return cfg, err
	}
	return cfg, json.Unmarshal(data, &cfg)
}

// child finds a directory entry by name; ISO 9660 names are upper case
// and may carry a ";1" version suffix.
func child(dir *iso9660.File, name string) (*iso9660.File, error) {
	children, err := dir.GetChildren()
	if err != nil {
		return nil, err
	}
	for _, c := range children {
		n := strings.TrimSuffix(c.Name(), ";1")
		if strings.EqualFold(n, name) || strings.EqualFold(strings.TrimSuffix(n, "."), name) {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%s not found on the ISO", name)
}

// DeployIPXEScript returns an iPXE script that boots the deploy kernel and
// initrd with the boot configuration as kernel arguments.
func DeployIPXEScript(kernelURL, initrdURL string, cfg deployapi.BootConfig) string {
	return fmt.Sprintf("#!ipxe\nkernel %s initrd=initrd %s=%s %s=%s %s=%s console=ttyS0\ninitrd --name initrd %s\nboot\n",
		kernelURL, ArgEngine, cfg.EngineURL, ArgHost, cfg.HostID, ArgToken, cfg.Token, initrdURL)
}

// IPXEBoot is what an iPXE script asks the firmware to load.
type IPXEBoot struct {
	KernelURL string
	InitrdURL string
	Args      map[string]string
}

// ParseIPXEScript reads the kernel, initrd and kernel arguments from a
// script of the form DeployIPXEScript writes.
func ParseIPXEScript(script string) (IPXEBoot, error) {
	b := IPXEBoot{Args: map[string]string{}}
	lines := strings.Split(script, "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "#!ipxe" {
		return b, fmt.Errorf("not an iPXE script")
	}
	for _, line := range lines[1:] {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "kernel":
			b.KernelURL = fields[1]
			for _, a := range fields[2:] {
				if k, v, ok := strings.Cut(a, "="); ok {
					b.Args[k] = v
				}
			}
		case "initrd":
			b.InitrdURL = fields[len(fields)-1]
		}
	}
	if b.KernelURL == "" {
		return b, fmt.Errorf("the iPXE script loads no kernel")
	}
	return b, nil
}

// BootConfigFromArgs reads the boot configuration from kernel arguments.
func BootConfigFromArgs(args map[string]string) (deployapi.BootConfig, error) {
	cfg := deployapi.BootConfig{EngineURL: args[ArgEngine], HostID: args[ArgHost], Token: args[ArgToken]}
	if cfg.EngineURL == "" || cfg.HostID == "" || cfg.Token == "" {
		return cfg, fmt.Errorf("kernel arguments %s, %s and %s are required", ArgEngine, ArgHost, ArgToken)
	}
	return cfg, nil
}

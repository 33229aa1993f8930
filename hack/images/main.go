// Command images builds metalshift's boot images into a directory
// (`make images` → bin/images), skipping the work when the inputs did not
// change:
//
//   - metalshift-live.iso: a hybrid ISO (El Torito entries for BIOS and
//     UEFI, GRUB from Debian's grub-pc-bin and grub-efi-amd64-bin, written by
//     grub-mkrescue with xorriso) that boots Debian's kernel with an
//     initramfs this command writes itself: the agent as /init and the
//     kernel modules of common storage controllers and NICs. Its
//     /boot/host.img is the region a server replaces per host.
//   - metalshift-live.vmlinuz and metalshift-live.initrd: the same kernel
//     and initramfs, for iPXE.
//   - metalshift-testos.img: a small raw disk image for the QEMU lab, which
//     boots (BIOS and UEFI) a kernel whose init mounts the config drive and
//     prints the SHA-256 of its user data.
//   - oci/manager: the manager's container image, an OCI image layout
//     tagged manager.ImageRepository:<version> (container.go), built
//     last: it holds the live images.
//
// The kernel comes from Debian's linux-image-amd64, fetched with `apt-get
// download` and unpacked with dpkg-deb into the cache; nothing is installed.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/imageservice/cpio"
)

// builderVersion changes when this command's output changes for the same
// inputs.
const builderVersion = "2"

// liveModules are what the live image loads: storage controllers and
// NICs of common servers and of virtual machines. Their dependencies come
// along.
var liveModules = []string{
	// libcrc32c's soft dependency (bnx2x, qede)
	"crc32c_generic",
	// virtual machines
	"virtio_pci", "virtio_blk", "virtio_scsi", "virtio_net",
	// entropy: DHCP and TLS read the kernel's random numbers, which block
	// until it is seeded; a VM without RDRAND needs its virtio RNG
	"virtio_rng",
	// storage
	"ahci", "ata_piix", "sd_mod", "sr_mod", "nvme", "megaraid_sas", "mpt3sas", "smartpqi", "hpsa",
	// Intel, Mellanox, Broadcom and other usual NICs
	"e1000", "e1000e", "igb", "igc", "ixgbe", "i40e", "ice", "mlx4_en", "mlx5_core", "bnxt_en", "tg3", "bnx2x", "qede", "r8169",
	// the metal cloud installer bonds the NICs (agent/metalcloud); the
	// image has no modprobe to load it on demand
	"bonding",
}

// testOSModules are what the test OS needs to read its config drive.
var testOSModules = []string{"virtio_pci", "virtio_blk", "virtio_scsi", "ahci", "ata_piix", "sd_mod", "nvme", "isofs"}

type builder struct {
	out, cache string
	agent      string
	logf       func(string, ...any)
}

func main() {
	b := &builder{logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, "images: "+format+"\n", args...) }}
	flag.StringVar(&b.out, "out", "bin/images", "Output directory")
	flag.StringVar(&b.agent, "agent", "bin/metalshift-agent", "The agent binary (static, CGO off)")
	force := flag.Bool("force", false, "Build even when up to date")
	var img imageOptions
	flag.StringVar(&img.version, "version", "", "The container images' tag, the version (required; make images passes VERSION)")
	platforms := flag.String("platforms", "linux/amd64", "The container images' platforms, comma-separated (linux/amd64,linux/arm64)")
	flag.StringVar(&img.caBundle, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "The CA certificates (PEM) the container images trust")
	flag.Parse()
	img.platforms = strings.Split(*platforms, ",")
	b.cache = filepath.Join(b.out, "cache")
	if err := os.MkdirAll(b.cache, 0o750); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
	img.live = b.out
	err := resolveImageOptions(&img)
	if err == nil {
		err = b.run(*force)
	}
	if err == nil {
		err = b.managerImage(img, *force)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

// Manifest describes a build; images.json holds it.
type Manifest struct {
	Inputs        string            `json:"inputs"`
	KernelPackage string            `json:"kernelPackage"`
	KernelRelease string            `json:"kernelRelease"`
	Files         map[string]int64  `json:"files"`
	SHA256        map[string]string `json:"sha256"`
	BuildSeconds  float64           `json:"buildSeconds"`
}

func (b *builder) run(force bool) error {
	start := time.Now()
	for _, tool := range []string{"apt-get", "dpkg-deb", "grub-mkrescue", "xorriso", "mformat"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is missing: install Debian's apt, dpkg, grub-pc-bin, grub-efi-amd64-bin, xorriso and mtools (hack/deps.sh images does; make images runs it)", tool)
		}
	}
	for _, d := range []string{"/usr/lib/grub/i386-pc", "/usr/lib/grub/x86_64-efi"} {
		if _, err := os.Stat(d); err != nil {
			return fmt.Errorf("%s is missing: install Debian's grub-pc-bin and grub-efi-amd64-bin", d)
		}
	}
	if err := os.MkdirAll(b.cache, 0o750); err != nil {
		return err
	}
	testos := filepath.Join(b.cache, "testos")
	if err := goBuild(testos, "./hack/images/testos", "amd64"); err != nil {
		return err
	}
	pkg, err := kernelPackage()
	if err != nil {
		return err
	}
	inputs, err := digest(builderVersion, pkg, grubVersion(), b.agent, testos, strings.Join(liveModules, ","), strings.Join(testOSModules, ","))
	if err != nil {
		return err
	}
	manifestPath := filepath.Join(b.out, "images.json")
	if !force {
		var old Manifest
		if data, err := os.ReadFile(manifestPath); err == nil && json.Unmarshal(data, &old) == nil && old.Inputs == inputs && b.present(old) {
			b.logf("up to date in %s (%s)", b.out, pkg)
			return nil
		}
	}
	kdir, release, err := b.kernel(pkg)
	if err != nil {
		return err
	}
	m := Manifest{Inputs: inputs, KernelPackage: pkg, KernelRelease: release, Files: map[string]int64{}, SHA256: map[string]string{}}
	vmlinuz := filepath.Join(kdir, "boot", "vmlinuz-"+release)
	mods := filepath.Join(kdir, "lib", "modules", release)

	agent, err := os.ReadFile(b.agent)
	if err != nil {
		return fmt.Errorf("the agent binary: %w (make images builds it first)", err)
	}
	liveInitrd, err := initramfs(agent, mods, release, liveModules)
	if err != nil {
		return err
	}
	tos, err := os.ReadFile(testos)
	if err != nil {
		return err
	}
	testInitrd, err := initramfs(tos, mods, release, testOSModules)
	if err != nil {
		return err
	}
	live := filepath.Join(b.out, imageservice.LiveISOFile)
	if err := b.iso(live, "METALSHIFT_LIVE", vmlinuz, liveInitrd, imageservice.PlaceholderRegion(), "metalshift live (agent)"); err != nil {
		return err
	}
	if err := copyFile(vmlinuz, filepath.Join(b.out, imageservice.LiveKernelFile)); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(b.out, imageservice.LiveInitrdFile), liveInitrd); err != nil {
		return err
	}
	if err := b.iso(filepath.Join(b.out, TestOSFile), "METALSHIFT_TESTOS", vmlinuz, testInitrd, nil, "metalshift test OS"); err != nil {
		return err
	}
	for _, f := range []string{imageservice.LiveISOFile, imageservice.LiveKernelFile, imageservice.LiveInitrdFile, TestOSFile} {
		size, sum, err := fileSum(filepath.Join(b.out, f))
		if err != nil {
			return err
		}
		m.Files[f], m.SHA256[f] = size, sum
	}
	m.BuildSeconds = time.Since(start).Seconds()
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := writeFile(manifestPath, append(data, '\n')); err != nil {
		return err
	}
	b.logf("built in %.1fs from %s (kernel %s):", m.BuildSeconds, pkg, release)
	for _, f := range []string{imageservice.LiveISOFile, imageservice.LiveKernelFile, imageservice.LiveInitrdFile, TestOSFile} {
		b.logf("  %-26s %6.1f MiB", f, float64(m.Files[f])/(1<<20))
	}
	return nil
}

// TestOSFile is the OS image for the QEMU lab.
const TestOSFile = "metalshift-testos.img"

func (b *builder) present(m Manifest) bool {
	for f, size := range m.Files {
		if st, err := os.Stat(filepath.Join(b.out, f)); err != nil || st.Size() != size {
			return false
		}
	}
	return len(m.Files) > 0
}

// goBuild builds pkg, static (CGO off), for linux on goarch, with the
// linker flags given.
func goBuild(out, pkg, goarch string, ldflags ...string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags="+strings.Join(ldflags, " "), "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, o)
	}
	return nil
}

// kernelPackage is the versioned package linux-image-amd64 depends on.
func kernelPackage() (string, error) {
	out, err := exec.Command("apt-cache", "depends", "linux-image-amd64").Output()
	if err != nil {
		return "", fmt.Errorf("apt-cache depends linux-image-amd64: %w (is apt's package list there? apt-get update)", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if dep, ok := strings.CutPrefix(strings.TrimSpace(line), "Depends: "); ok && strings.HasPrefix(dep, "linux-image-") {
			ver, err := exec.Command("apt-cache", "show", "--no-all-versions", dep).Output()
			if err != nil {
				return "", err
			}
			for _, l := range strings.Split(string(ver), "\n") {
				if v, ok := strings.CutPrefix(l, "Version: "); ok {
					return dep + "=" + v, nil
				}
			}
			return dep, nil
		}
	}
	return "", errors.New("linux-image-amd64 depends on no linux-image package")
}

func grubVersion() string {
	out, _ := exec.Command("grub-mkrescue", "--version").Output()
	return strings.TrimSpace(string(out))
}

// kernel downloads and unpacks the kernel package into the cache, once.
func (b *builder) kernel(pkg string) (dir, release string, err error) {
	name, _, _ := strings.Cut(pkg, "=")
	dir = filepath.Join(b.cache, strings.NewReplacer("=", "_", ":", "_").Replace(pkg))
	release = strings.TrimPrefix(name, "linux-image-")
	release = strings.TrimSuffix(release, "-unsigned")
	if _, err := os.Stat(filepath.Join(dir, "boot", "vmlinuz-"+release)); err == nil {
		return dir, release, nil
	}
	dl := filepath.Join(b.cache, "download")
	if err := os.MkdirAll(dl, 0o750); err != nil {
		return "", "", err
	}
	b.logf("downloading %s", pkg)
	cmd := exec.Command("apt-get", "download", "-q", pkg)
	cmd.Dir = dl
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("apt-get download %s: %v\n%s", pkg, err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dl, name+"_*.deb"))
	if len(debs) == 0 {
		return "", "", fmt.Errorf("apt-get download %s wrote no .deb", pkg)
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if out, err := exec.Command("dpkg-deb", "-x", debs[len(debs)-1], tmp).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("dpkg-deb -x: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", "", err
	}
	_ = os.Remove(debs[len(debs)-1])
	return dir, release, nil
}

// initramfs writes a gzip-compressed newc archive: init as /init, the
// modules wanted (with their dependencies) and the order to load them.
func initramfs(init []byte, modDir, release string, wanted []string) ([]byte, error) {
	order, err := moduleOrder(modDir, wanted)
	if err != nil {
		return nil, err
	}
	var raw bytes.Buffer
	w := cpio.NewWriter(&raw)
	dirs := map[string]bool{}
	mkdirs := func(p string) {
		var parts []string
		for _, part := range strings.Split(filepath.Dir(p), "/") {
			parts = append(parts, part)
			d := strings.Join(parts, "/")
			if d != "." && !dirs[d] {
				dirs[d] = true
				_ = w.Dir(d, 0o755)
			}
		}
	}
	for _, d := range []string{"dev/x", "proc/x", "sys/x", "run/x", "tmp/x", "mnt/x", "etc/metalshift/x"} {
		mkdirs(d)
	}
	_ = w.CharDev("dev/console", 0o600, 5, 1)
	_ = w.File("init", 0o755, init)
	for _, rel := range order {
		data, err := os.ReadFile(filepath.Join(modDir, rel))
		if err != nil {
			return nil, err
		}
		dst := filepath.Join("lib/modules", release, rel)
		mkdirs(dst)
		_ = w.File(dst, 0o644, data)
	}
	_ = w.File("lib/modules/load.order", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	if err := w.Close(); err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return gz.Bytes(), nil
}

// moduleOrder returns the paths (relative to modDir) of the wanted
// modules and their dependencies, each after what it depends on. A module
// built into the kernel (modules.builtin) needs no file.
func moduleOrder(modDir string, wanted []string) ([]string, error) {
	paths := map[string]string{}
	err := filepath.WalkDir(filepath.Join(modDir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".ko") {
			rel, _ := filepath.Rel(modDir, p)
			paths[modName(filepath.Base(p))] = rel
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if data, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(data)) {
			builtin[modName(filepath.Base(l))] = true
		}
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string) error
	visit = func(name string) error {
		name = modName(name)
		if state[name] == 2 || builtin[name] {
			return nil
		}
		if state[name] == 1 {
			return fmt.Errorf("module dependency cycle at %s", name)
		}
		rel, ok := paths[name]
		if !ok {
			return fmt.Errorf("kernel module %s is not in %s", name, modDir)
		}
		state[name] = 1
		deps, err := moduleDeps(filepath.Join(modDir, rel))
		if err != nil {
			return err
		}
		sort.Strings(deps)
		for _, d := range deps {
			if err := visit(d); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		state[name] = 2
		order = append(order, rel)
		return nil
	}
	for _, w := range wanted {
		if err := visit(w); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func modName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(file, ".ko"), "-", "_")
}

// moduleDeps reads "depends=" from a module's .modinfo section.
func moduleDeps(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read only
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("%s has no .modinfo", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// iso writes a hybrid ISO with grub-mkrescue: GRUB for BIOS (El Torito
// and an MBR for disks) and UEFI (an EFI system partition image), which
// boots the kernel with the initramfs and, when region is given, the
// region as a second initrd at imageservice.ISOHostPath.
func (b *builder) iso(out, label, vmlinuz string, initrd, region []byte, title string) error {
	stage, err := os.MkdirTemp(b.cache, "stage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage) //nolint:errcheck // a staging directory in the cache
	if err := os.MkdirAll(filepath.Join(stage, "boot", "grub"), 0o750); err != nil {
		return err
	}
	if err := copyFile(vmlinuz, filepath.Join(stage, imageservice.ISOKernelPath)); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stage, imageservice.ISOInitrdPath), initrd, 0o644); err != nil {
		return err
	}
	initrds := imageservice.ISOInitrdPath
	if region != nil {
		if err := os.WriteFile(filepath.Join(stage, imageservice.ISOHostPath), region, 0o644); err != nil {
			return err
		}
		initrds += " " + imageservice.ISOHostPath
	}
	cfg := fmt.Sprintf(`serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=1
menuentry %q {
	linux %s %s
	initrd %s
}
`, title, imageservice.ISOKernelPath, imageservice.KernelArgs, initrds)
	if err := os.WriteFile(filepath.Join(stage, "boot", "grub", "grub.cfg"), []byte(cfg), 0o644); err != nil {
		return err
	}
	tmp := out + ".tmp"
	cmd := exec.Command("grub-mkrescue", "--compress=xz", "-o", tmp, stage, "--", "-volid", label)
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("grub-mkrescue: %v\n%s", err, o)
	}
	return os.Rename(tmp, out)
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return writeFile(dst, data)
}

// writeFile replaces dst with data through a new file, so that a deploy
// server holding the old one open goes on serving whole, old bytes.
func writeFile(dst string, data []byte) error {
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

func fileSum(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return n, hex.EncodeToString(h.Sum(nil)), err
}

// digest identifies the inputs: strings as they are, files by content.
func digest(parts ...string) (string, error) {
	h := sha256.New()
	for _, p := range parts {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return "", err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return "", err
			}
		} else {
			h.Write([]byte(p))
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

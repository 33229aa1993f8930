// Package configdrive writes and reads an OpenStack config drive the way
// Ironic puts one on a disk it provisioned, so that first-boot software
// (Ignition's openstack provider, cloud-init's ConfigDrive datasource) finds
// it: an ISO 9660 filesystem labelled config-2 in a partition at the end of
// the disk.
//
// It is machine-side code: it runs in the deploy agent, in the simulator, and
// in a provisioned OS that reads its config drive from the whole disk. It
// imports no controller package, only the standard library, api/deploy/v1
// and go-diskfs.
//
// # The filesystem (Build)
//
// Like openstacksdk's configdrive.build, which Ironic's conductor uses to
// turn a node's meta_data / user_data / network_data into a config drive:
// ISO 9660 with Rock Ridge and Joliet (genisoimage -J -r -V config-2), the
// volume label config-2, and for both metadata versions 2012-08-10 and
// latest the files openstack/<version>/meta_data.json (always),
// user_data and network_data.json (when given). Nothing else: no ec2/
// tree and no openstack/content. Ignition reads
// /openstack/latest/user_data from the filesystem labelled config-2 or
// CONFIG-2; cloud-init reads openstack/latest (or the newest version it
// knows) from a vfat or iso9660 filesystem labelled config-2.
//
// The ISO is written with github.com/diskfs/go-diskfs (filesystem/iso9660),
// because it writes Rock Ridge and Joliet: without them ISO 9660 names are
// upper-case 8.3 or level-2 names ("USER_DAT"), and user_data would not be
// found. github.com/kdomanski/iso9660, which the image service uses for the
// deploy ISO, reads Rock Ridge but writes neither extension. go-diskfs
// builds the tree in a temporary directory (os.MkdirTemp) before it writes
// the image, into memory here. Reading is this package's own small ISO 9660
// reader (isoread.go): go-diskfs allocates whatever sizes a damaged
// filesystem declares, up to 4 GiB a directory.
//
// # The partition (Write)
//
// As ironic-python-agent's create_config_drive_partition (formerly
// ironic-lib's) does after a whole-disk image was written:
//
//   - A partition whose filesystem is labelled config-2 already (the image
//     brought one) is reused; two are an error.
//   - GPT: first what fix_gpt_partition does (sgdisk -e): the backup GPT,
//     which a whole-disk image carries at the end of the image, moves to
//     the end of the disk, and the primary header's alternate LBA and last
//     usable LBA follow. Then what sgdisk -n 0:-64MB:0 does: the first free
//     entry gets a partition from 64 MiB before the last usable sector,
//     aligned down to 1 MiB, to the last usable sector; type Linux
//     filesystem (8300), a random unique GUID. sgdisk leaves the partition
//     name empty; Write names it config-2 (by-partlabel), which no reader
//     depends on. The protective MBR is made to cover the disk, as sgdisk
//     does.
//   - MBR: what parted mkpart primary fat32 -64MiB -0 does: a primary
//     partition of type 0x0c in the last 64 MiB (start aligned down to
//     1 MiB); on a disk larger than 2 TiB the 64 MiB end 1 MiB below 2 TiB,
//     the most MBR can address. Four primary partitions already are an
//     error, as in Ironic.
//   - No partition table: Ironic fails the deploy (count_mbr_partitions
//     finds no msdos table), and so does Write, with ErrNoPartitionTable:
//     a partition table cannot be added without overwriting the image's
//     first sectors. WriteUnpartitioned puts the filesystem in the disk's
//     last 64 MiB without a partition instead; Read finds it, cloud-init
//     and Ignition do not. The simulator uses it for its synthetic
//     table-less test images.
//
// The data of a config drive is limited by what fits in 64 MiB, as in
// Ironic.
//
// # Reading (Read) and wiping (Wipe)
//
// Read looks where first-boot software looks: every partition of the GPT
// (primary, else backup) or MBR (primary and logical) whose ISO 9660 volume
// label is config-2, then a whole-disk ISO 9660 filesystem (a config drive
// attached as a disk of its own), then the unpartitioned place. vfat config
// drives are not supported.
//
// Wipe is metadata cleaning as ironic-python-agent's
// erase_devices_metadata does it (wipefs --all on every partition and the
// disk, then zeroing the primary and backup GPT): the first MiB of every
// partition found, the first and last MiB of the disk, the backup GPT
// where the primary header says it is, and the unpartitioned place.
package configdrive

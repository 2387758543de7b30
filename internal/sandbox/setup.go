package sandbox

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// setUp builds init's view of the system before any program starts. An
// error ends the sandbox; notes name what is weaker than asked but still
// safe to run with.
func setUp(p params) (notes []string, err error) {
	if p.Flags&unix.CLONE_NEWNS == 0 {
		return nil, nil
	}
	// Nothing mounted here may reach the host's mount namespace.
	if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("making the mounts private: %w", err)
	}
	if p.Flags&unix.CLONE_NEWPID != 0 {
		// A /proc of the sandbox's own pid namespace: ps shows the agent's
		// processes and the pids the agent can use.
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			notes = append(notes, fmt.Sprintf("no /proc of its own (%v): ps shows the host's processes, which the agent still cannot signal", err))
		}
	}
	// The agent is root by the host's own uid (files keep their owners),
	// and the kernel lets uid 0 write most of /proc/sys and /sys: a core
	// pattern run by the host's kernel, another agent's cgroup limits. The
	// kernel's knobs are read-only here.
	for _, path := range kernelKnobs {
		if err := readOnly(path); err != nil {
			return notes, fmt.Errorf("making %s read-only: %w", path, err)
		}
	}
	if err := minimalDev(); err != nil {
		return notes, err
	}
	if p.Flags&unix.CLONE_NEWNET != 0 {
		if err := loopbackUp(); err != nil {
			return notes, fmt.Errorf("bringing up loopback in the sandbox's network: %w", err)
		}
	}
	if p.Files != nil {
		fnotes, err := confineFiles(*p.Files)
		notes = append(notes, fnotes...)
		if err != nil {
			return notes, err
		}
	}
	return notes, nil
}

// kernelKnobs are made read-only in every sandbox with a mount namespace.
var kernelKnobs = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/sys"}

// readOnly binds path onto itself (when it is not a mount already) and
// makes it and every mount below it read-only. A path that does not exist
// is left.
func readOnly(path string) error {
	if _, err := os.Lstat(path); err != nil {
		return nil
	}
	if err := unix.Mount(path, path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	return unix.MountSetattr(-1, path, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV})
}

// devNodes are the host's devices a sandbox's /dev holds; no console, no
// other terminal, no disk.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// minimalDev replaces /dev with a tmpfs holding devNodes (bound from the
// host's), a devpts of the sandbox's own (its /dev/pts holds only the
// agent's terminals, and /dev/ptmx opens new ones there, at most
// PTYsPerAgent) and a private /dev/shm (POSIX shared memory is files
// there, shared by whoever sees the same directory).
func minimalDev() error {
	fds := map[string]int{}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, n := range devNodes {
		fd, err := unix.Open("/dev/"+n, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening /dev/%s: %w", n, err)
		}
		fds[n] = fd
	}
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mounting a /dev of the sandbox's own: %w", err)
	}
	for n, fd := range fds {
		path := "/dev/" + n
		if err := os.WriteFile(path, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding %s: %w", path, err)
		}
	}
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,max="+strconv.Itoa(PTYsPerAgent)); err != nil {
		return fmt.Errorf("mounting a devpts of the sandbox's own: %w", err)
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("mounting a private /dev/shm: %w", err)
	}
	for link, target := range map[string]string{
		"/dev/ptmx": "pts/ptmx", "/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0",
		"/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	return nil
}

// PTYsPerAgent bounds the terminals of one agent's devpts: an agent that
// opens terminals until it cannot runs out of its own, not of the
// machine's (kernel.pty.max, 4096 by default, shared by everyone).
const PTYsPerAgent = 256

// loopbackUp sets IFF_UP on lo, the only interface of a new network
// namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// privateDirs are the directories a Files sandbox gets empty and of its
// own (/dev/shm is private at every level).
var privateDirs = []string{"/tmp", "/var/tmp"}

// confineFiles makes every mount read-only, gives the sandbox a private
// /tmp, /var/tmp and /dev/shm, and then binds the writable directories back
// writable (a writable directory under /tmp is bound into the private one
// at the same path).
func confineFiles(fp fileParams) (notes []string, err error) {
	// Held by descriptor: the private /tmp would hide one below it.
	type held struct {
		path string
		fd   int
	}
	var keep []held
	for _, dir := range fp.Writable {
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s is not writable in the sandbox (%v)", dir, err))
			continue
		}
		keep = append(keep, held{dir, fd})
	}
	defer func() {
		for _, h := range keep {
			unix.Close(h.fd)
		}
	}()
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(-1, "/", unix.AT_RECURSIVE, ro); err != nil {
		return notes, fmt.Errorf("making the system read-only (mount_setattr): %w", err)
	}
	for _, dir := range privateDirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return notes, fmt.Errorf("mounting a private %s: %w", dir, err)
		}
	}
	// Hidden directories are empty: a tmpfs over each, made read-only once
	// the writable directories inside one are bound back.
	var hidden []string
	for _, dir := range fp.Hide {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
			return notes, fmt.Errorf("hiding %s: %w", dir, err)
		}
		hidden = append(hidden, dir)
	}
	rw := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
	// The devpts and /dev/shm stay writable: they are the sandbox's own.
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		if err := unix.MountSetattr(-1, d, 0, rw); err != nil {
			return notes, fmt.Errorf("keeping %s writable: %w", d, err)
		}
	}
	for _, h := range keep {
		// Under a private directory, the path is made anew there first.
		if err := os.MkdirAll(h.path, 0o755); err != nil {
			notes = append(notes, fmt.Sprintf("%s is not writable in the sandbox (%v)", h.path, err))
			continue
		}
		src := "/proc/self/fd/" + strconv.Itoa(h.fd)
		if err := unix.Mount(src, h.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			notes = append(notes, fmt.Sprintf("%s is not writable in the sandbox (%v)", h.path, err))
			continue
		}
		if err := unix.MountSetattr(-1, h.path, unix.AT_RECURSIVE, rw); err != nil {
			notes = append(notes, fmt.Sprintf("%s stays read-only in the sandbox (%v)", h.path, err))
		}
	}
	for _, dir := range hidden {
		if err := unix.MountSetattr(-1, dir, 0, ro); err != nil {
			return notes, fmt.Errorf("making hidden %s read-only: %w", dir, err)
		}
	}
	return notes, nil
}

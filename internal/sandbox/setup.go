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
	// A devpts of the sandbox's own: its /dev/pts holds only the agent's
	// terminals, and /dev/ptmx opens new ones there.
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,max="+strconv.Itoa(PTYsPerAgent)); err != nil {
		return notes, fmt.Errorf("mounting a devpts of the sandbox's own: %w", err)
	}
	if fi, err := os.Lstat("/dev/ptmx"); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		if err := unix.Mount("/dev/pts/ptmx", "/dev/ptmx", "", unix.MS_BIND, ""); err != nil {
			return notes, fmt.Errorf("binding /dev/ptmx to the sandbox's devpts: %w", err)
		}
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
// own.
var privateDirs = []string{"/tmp", "/var/tmp", "/dev/shm"}

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
	rw := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
	// The devpts stays writable: it is the sandbox's own.
	if err := unix.MountSetattr(-1, "/dev/pts", 0, rw); err != nil {
		return notes, fmt.Errorf("keeping /dev/pts writable: %w", err)
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
	return notes, nil
}

package sandbox

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock is the second layer of level fs: should a mount be undone or
// missed, the kernel still refuses every write outside the writable
// directories. It is applied to the spawner's thread alone (a Landlock
// domain is per thread, and a program forked from that thread inherits it),
// so init itself keeps opening terminals.

// landlockWritable are the paths writes stay allowed beneath.
func landlockWritable(fp fileParams) []string {
	paths := append([]string{}, fp.Writable...)
	paths = append(paths, privateDirs...)
	// /dev: the terminals, /dev/null and /dev/shm.
	return append(paths, "/dev")
}

// landlockWrites restricts this thread's writes (of every kind the kernel's
// Landlock version knows: write, create, remove, rename, truncate) to
// beneath paths. Reads are left to the mounts. A kernel without Landlock
// gives a note, not an error.
func landlockWrites(paths []string) (note string, err error) {
	abi, _, errno := unix.RawSyscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return fmt.Sprintf("no Landlock layer (%v): the read-only mounts alone keep files", errno), nil
	}
	writes := uint64(unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= 2 {
		writes |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		writes |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: writes}
	fd, _, errno := unix.RawSyscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return "", fmt.Errorf("creating a Landlock ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	for _, path := range paths {
		dir, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("opening %s for Landlock: %w", path, err)
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: writes, Parent_fd: int32(dir)}
		_, _, errno := unix.RawSyscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		unix.Close(dir)
		if errno != 0 {
			return "", fmt.Errorf("allowing writes beneath %s: %w", path, errno)
		}
	}
	// Landlock asks for no_new_privs first (of this thread, and so of every
	// program started from it: a set-uid program gains nothing here).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "", fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return "", fmt.Errorf("enforcing Landlock: %w", errno)
	}
	return "", nil
}

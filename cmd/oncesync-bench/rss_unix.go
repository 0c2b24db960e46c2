//go:build unix

package main

import (
	"os"
	"runtime"
	"syscall"
	"time"
)

// maxRSSKiB is the child's peak RSS in KiB from its rusage (ru_maxrss: KiB on
// Linux, bytes on Darwin); 0 when the platform does not say.
func maxRSSKiB(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss) / 1024
	}
	return int64(ru.Maxrss)
}

// selfCPU is this process's user+system CPU so far: the fake's, while a
// timed child runs (the bench itself only waits).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

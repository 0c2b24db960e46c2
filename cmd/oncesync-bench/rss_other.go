//go:build !unix

package main

import (
	"os"
	"time"
)

// maxRSSKiB is 0 where getrusage is not available.
func maxRSSKiB(*os.ProcessState) int64 { return 0 }

// selfCPU is 0 where getrusage is not available.
func selfCPU() time.Duration { return 0 }

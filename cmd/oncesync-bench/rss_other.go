//go:build !unix

package main

import "os"

// maxRSSKiB is 0 where getrusage is not available.
func maxRSSKiB(*os.ProcessState) int64 { return 0 }

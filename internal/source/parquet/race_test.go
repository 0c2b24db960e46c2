//go:build race

package parquet_test

const raceEnabled = true

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"github.com/spf13/pflag"

	"github.com/oncesync/oncesync/internal/cli"
)

// inprocMain is the hidden `inproc` subcommand: it runs the oncesync CLI
// (the same cli.Main the binary runs) in this process under the CPU
// profiler: `inproc --cpuprofile F -- run --config C SYNC`.
func inprocMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("inproc", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	profile := fs.String("cpuprofile", "", "write a CPU profile here")
	memProfile := fs.String("memprofile", "", "also write an allocation profile here (go tool pprof -sample_index=alloc_space)")
	traceOut := fs.String("trace", "", "also write an execution trace here (go tool trace -pprof=net|sync|syscall|sched says where the run waits)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *profile == "" || fs.NArg() == 0 {
		return fmt.Errorf("%w: inproc needs --cpuprofile FILE -- ONCESYNC-ARGS", errUsage)
	}
	f, err := os.Create(*profile)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	if *traceOut != "" {
		tf, err := os.Create(*traceOut)
		if err != nil {
			return err
		}
		defer tf.Close()
		if err := trace.Start(tf); err != nil {
			return err
		}
		defer trace.Stop()
	}
	code := cli.Main(ctx, fs.Args(), cli.Env{Stdout: stdout, Stderr: stderr, LookupEnv: os.LookupEnv})
	pprof.StopCPUProfile()
	if *memProfile != "" {
		mf, err := os.Create(*memProfile)
		if err != nil {
			return err
		}
		defer mf.Close()
		if err := pprof.Lookup("allocs").WriteTo(mf, 0); err != nil {
			return err
		}
	}
	if code != 0 {
		return fmt.Errorf("oncesync exited %d", code)
	}
	return f.Close()
}

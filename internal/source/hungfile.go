package source

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// A file on a network filesystem whose server stopped answering (an NFS
// hard mount, a stalled FUSE mount such as gcsfuse or s3fs) blocks an open,
// a read or a stat in the kernel, where no context reaches it: a run held
// its lease, renewed, for as long as the mount hung, and every later tick
// was skipped as already running. A File makes each such call in a
// goroutine of its own and gives it up when its context ends (ReadWithin's
// source.timeout, a drain), so that the run fails unavailable and says so.
// A call given up may still return later: it writes only into its own
// buffer, and the File is not used again.

// File is an open file whose calls end with its context (Use). It is used
// by one goroutine at a time, as a source's stream is.
type File struct {
	f   *os.File
	ctx context.Context // the current page's (set by use)
	// stuck is set once a call was given up: every later call fails with
	// it, since the call may still be running on the file.
	stuck error
	buf   []byte // reused for reads while no call was given up
}

// Use makes later calls end with ctx.
func (w *File) Use(ctx context.Context) { w.ctx = ctx }

// direct reports whether calls may be made in place: a context that can
// never end has nothing to give up for.
func (w *File) direct() bool { return w.ctx == nil || w.ctx.Done() == nil }

// do runs fn, or fails once w's context ended first; in place when the
// context can never end (direct).
func (w *File) do(fn func()) error {
	if w.direct() {
		fn()
		return nil
	}
	if w.stuck != nil {
		return w.stuck
	}
	if err := w.ctx.Err(); err != nil {
		return err
	}
	err := Within(w.ctx, fn)
	if err != nil {
		w.stuck, w.buf = err, nil // the call keeps its buffer
	}
	return err
}

// Within runs fn, a call on the filesystem, in a goroutine and waits for
// it or for ctx, whichever ends first; fn must then write only into
// variables its caller no longer reads.
func Within(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("a call on the file did not return (a network filesystem that stopped answering?): %w", ctx.Err())
	}
}

func (w *File) buffer(n int) []byte {
	if cap(w.buf) < n {
		w.buf = make([]byte, n)
	}
	return w.buf[:n]
}

// read is one read into p by read, made into the File's own buffer when
// the call may be given up: a call given up may still return later, and
// must not then write into p, which its caller has reused.
func (w *File) read(p []byte, read func([]byte) (int, error)) (int, error) {
	if w.direct() {
		return read(p)
	}
	buf := w.buffer(len(p))
	var (
		n   int
		err error
	)
	if e := w.do(func() { n, err = read(buf) }); e != nil {
		return 0, e
	}
	copy(p, buf[:n])
	return n, err
}

func (w *File) Read(p []byte) (int, error) { return w.read(p, w.f.Read) }

func (w *File) ReadAt(p []byte, off int64) (int, error) {
	return w.read(p, func(b []byte) (int, error) { return w.f.ReadAt(b, off) })
}

func (w *File) Seek(off int64, whence int) (int64, error) {
	var (
		n   int64
		err error
	)
	if e := w.do(func() { n, err = w.f.Seek(off, whence) }); e != nil {
		return 0, e
	}
	return n, err
}

func (w *File) Stat() (fs.FileInfo, error) {
	var (
		fi  fs.FileInfo
		err error
	)
	if e := w.do(func() { fi, err = w.f.Stat() }); e != nil {
		return nil, e
	}
	return fi, err
}

// Close closes the file; after a call was given up, without waiting for it.
func (w *File) Close() error {
	if w.stuck != nil {
		go w.f.Close()
		return nil
	}
	return w.f.Close()
}

var _ io.ReadSeeker = (*File)(nil)
var _ io.ReaderAt = (*File)(nil)

// OpenFile opens path for reading, giving up when ctx ends first (the
// file is then closed once the open returns). Its calls end with ctx until
// Use says otherwise.
func OpenFile(ctx context.Context, path string) (*File, error) {
	w := &File{ctx: ctx}
	if w.direct() {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		w.f = f
		return w, nil
	}
	type opened struct {
		f   *os.File
		err error
	}
	res := make(chan opened, 1)
	if err := Within(ctx, func() {
		f, err := os.Open(path)
		res <- opened{f, err}
	}); err != nil {
		go func() {
			if o := <-res; o.f != nil {
				_ = o.f.Close()
			}
		}()
		return nil, err
	}
	o := <-res
	if o.err != nil {
		return nil, o.err
	}
	w.f = o.f
	return w, nil
}

// Stat is os.Stat(path), given up when ctx ends first.
func Stat(ctx context.Context, path string) (fs.FileInfo, error) {
	if ctx.Done() == nil {
		return os.Stat(path)
	}
	var (
		fi  fs.FileInfo
		err error
	)
	if e := Within(ctx, func() { fi, err = os.Stat(path) }); e != nil {
		return nil, e
	}
	return fi, err
}

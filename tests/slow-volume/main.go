// Command slow-volume mounts a directory again through FUSE, passing every operation through
// to it, and delays each fsync and fdatasync by the number of milliseconds written in a control
// file: a volume whose flushes stall, for tests/cluster_fault_schedule.rs (tc netem and
// device-mapper do not work on the machines the tests run on).
//
//	slow-volume -source DIR -mount MOUNTPOINT -delay-file FILE
//
// It prints READY once mounted, reads FILE (a number of milliseconds, 0 or absent: no delay)
// every 50 ms, and unmounts on SIGTERM or SIGINT, or when its standard input closes (the test
// that started it ended, however it ended).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// slowFlush delays FSYNC (fsync and fdatasync of files) and FSYNCDIR.
type slowFlush struct {
	fuse.RawFileSystem
	delayMs *atomic.Int64
}

func (s *slowFlush) wait() {
	if ms := s.delayMs.Load(); ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
}

func (s *slowFlush) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	s.wait()
	return s.RawFileSystem.Fsync(cancel, in)
}

func (s *slowFlush) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	s.wait()
	return s.RawFileSystem.FsyncDir(cancel, in)
}

func main() {
	source := flag.String("source", "", "the directory passed through")
	mountpoint := flag.String("mount", "", "where to mount it")
	delayFile := flag.String("delay-file", "", "file holding the fsync delay in milliseconds")
	flag.Parse()
	if *source == "" || *mountpoint == "" || *delayFile == "" {
		fmt.Println("FAIL -source, -mount and -delay-file are required")
		os.Exit(1)
	}
	root, err := fs.NewLoopbackRoot(*source)
	if err != nil {
		fmt.Printf("FAIL %v\n", err)
		os.Exit(1)
	}
	delayMs := &atomic.Int64{}
	raw := &slowFlush{RawFileSystem: fs.NewNodeFS(root, &fs.Options{}), delayMs: delayMs}
	server, err := fuse.NewServer(raw, *mountpoint, &fuse.MountOptions{
		FsName:      *source,
		Name:        "slow-volume",
		DirectMount: true,
		// The brokers run as the same user; several threads serve requests at once.
		MaxBackground: 64,
	})
	if err != nil {
		fmt.Printf("FAIL mount: %v\n", err)
		os.Exit(1)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		fmt.Printf("FAIL mount: %v\n", err)
		os.Exit(1)
	}
	go func() {
		for {
			text, err := os.ReadFile(*delayFile)
			ms := int64(0)
			if err == nil {
				ms, _ = strconv.ParseInt(strings.TrimSpace(string(text)), 10, 64)
			}
			delayMs.Store(ms)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	stop := make(chan os.Signal, 2)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop <- syscall.SIGTERM
	}()
	fmt.Println("READY")
	<-stop
	delayMs.Store(0)
	for i := 0; i < 100; i++ {
		if server.Unmount() == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Still busy: detach it (MNT_DETACH), as `umount -l` does.
	_ = syscall.Unmount(*mountpoint, syscall.MNT_DETACH)
}

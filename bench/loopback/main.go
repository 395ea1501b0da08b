// Command loopback mounts go-fuse's own loopback file system
// (fs.NewLoopbackRoot) with go-fuse's defaults, as the baseline scrfs is
// benchmarked against. It is not part of scrfs.
//
//	loopback [-passthrough=false] ORIGINAL MOUNTPOINT
//
// It prints "ready" on stdout once mounted and unmounts on SIGINT/SIGTERM.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	passthrough := flag.Bool("passthrough", true, "let the kernel pass reads and writes through to the original files")
	flag.Parse()
	if flag.NArg() != 2 {
		log.Fatal("usage: loopback [-passthrough=false] ORIGINAL MOUNTPOINT")
	}
	root, err := fs.NewLoopbackRoot(flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	opts := &fs.Options{MountOptions: fuse.MountOptions{FsName: flag.Arg(0), Name: "loopback", DirectMount: true}}
	if !*passthrough {
		opts.MountOptions.DisabledCapabilities = fuse.CAP_PASSTHROUGH
	}
	server, err := fs.Mount(flag.Arg(1), root, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	server.Unmount()
}

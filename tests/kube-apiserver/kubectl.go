package main

// `kube-apiserver kubectl ...` runs kubectl v1.37.2 from the same binary (most of its
// code is already linked in for the API server), so tests need no second download.

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func runKubectl(args []string) {
	// kubectl reads os.Args itself (plugins, flags): make it look like its own binary.
	os.Args = append([]string{"kubectl"}, args...)
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
	os.Exit(0)
}

// Package testenv starts a whole minictl control plane inside a Go test:
// an embedded etcd in the test's temporary directory, the API server on
// free loopback ports, and, when asked, the controller manager, the
// scheduler and simulated nodes. It is controller-runtime's envtest
// without the downloaded binaries, and with the controllers, so that a
// Deployment gets pods, a namespace goes away and the garbage collector
// removes what an owner owned.
//
//	func TestMyController(t *testing.T) {
//		env := testenv.Start(t, testenv.CRDDirectoryPaths("../config/crd/bases"),
//			testenv.WithControllers(), testenv.WithScheduler(), testenv.WithNodes(1))
//		cfg, _ := clientcmd.RESTConfigFromKubeConfig(env.Kubeconfig) // client-go
//		...
//	}
//
// Properties:
//   - Start returns once the API server answers, every CRD it installed is
//     Established, every webhook configuration is created, and, with
//     controllers, the default ServiceAccount exists (pods are admitted),
//     with nodes, every node is Ready.
//   - Everything Start started stops at the test's t.Cleanup, before its
//     temporary directory is removed, also when the test fails, calls
//     t.Fatal or panics: no goroutine, listener or directory outlives the
//     test. Nothing runs in another process.
//   - Environments are independent: each has its own etcd, data
//     directory, ports and certificate authority, so that parallel tests
//     (t.Parallel) may each start their own.
//   - Misuse (a CRD directory that is missing under ErrorIfCRDPathMissing,
//     a CRD the API server refuses, a port that is taken) ends the test
//     with t.Fatal and a message that says what to fix, never a hang.
//
// Design: testenv.go starts and stops an Env; options.go holds the
// options; identity.go makes the certificate authority, the kubeconfig
// and the users; crd.go and webhook.go install what the options name.
// The components besides the API server come from package cluster, the
// same that `minictl up` runs.
package testenv

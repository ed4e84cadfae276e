package testenv_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.uber.org/goleak"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/testenv"
)

// TestTenInParallel: ten environments run at once, each isolated (an
// object made in one is not in another), and when their tests end no
// goroutine, listening port or directory of theirs is left.
func TestTenInParallel(t *testing.T) {
	before := goleak.IgnoreCurrent()
	var mu sync.Mutex
	var urls, dirs []string
	t.Run("group", func(t *testing.T) {
		for i := range 10 {
			t.Run(fmt.Sprint("env-", i), func(t *testing.T) {
				t.Parallel()
				env := testenv.Start(t)
				mu.Lock()
				urls, dirs = append(urls, env.URL, env.InsecureURL), append(dirs, env.DataDir)
				mu.Unlock()
				ctx := context.Background()
				namespaces := client.For[*corev1.Namespace](env.Client())
				mine := fmt.Sprint("only-in-", i)
				if _, err := namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mine}}); err != nil {
					t.Fatal(err)
				}
				list, err := namespaces.List(ctx, "", metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, ns := range list.Items {
					if strings.HasPrefix(ns.Name, "only-in-") && ns.Name != mine {
						t.Errorf("env %d sees namespace %s of another env", i, ns.Name)
					}
				}
			})
		}
	})
	if len(dirs) != 10 {
		t.Fatalf("%d environments started, want 10", len(dirs))
	}
	goleak.VerifyNone(t, before)
	for _, u := range urls {
		addr := u[strings.Index(u, "//")+2:]
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still answers after its test ended", u)
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("data dir %s left behind (stat: %v)", d, err)
		}
	}
}

// TestNothingLeftAfterAPanic: a test that panics with an Env running
// still has its Env stopped and its directory removed. The panicking test
// runs in a child process (this test binary), with a TMPDIR of its own
// that must be empty afterwards.
func TestNothingLeftAfterAPanic(t *testing.T) {
	if os.Getenv("TESTENV_PANIC_CHILD") != "" {
		env := testenv.Start(t, testenv.WithControllers(), testenv.WithNodes(1))
		fmt.Println("DATADIR", env.DataDir)
		panic("the code under test panics")
	}
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNothingLeftAfterAPanic$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TESTENV_PANIC_CHILD=1", "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the panicking child passed:\n%s", out)
	}
	if !strings.Contains(string(out), "DATADIR "+tmp) || !strings.Contains(string(out), "the code under test panics") {
		t.Fatalf("the child did not start an Env in %s and panic:\n%s", tmp, out)
	}
	left, err := filepath.Glob(filepath.Join(tmp, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("left behind in TMPDIR after the panic: %v", left)
	}
}

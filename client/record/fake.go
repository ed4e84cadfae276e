package record

import (
	"fmt"
	"strings"
	"sync"

	"github.com/minictl/minictl/api"
)

// EventRecorder is what a component needs of a Recorder: the controllers,
// the scheduler and the kubelet take one, so that their tests can pass a
// FakeRecorder, and a nil one means Discard.
type EventRecorder interface {
	Event(obj api.Object, eventType, reason, message string)
	Eventf(obj api.Object, eventType, reason, messageFmt string, args ...any)
}

var (
	_ EventRecorder = (*Recorder)(nil)
	_ EventRecorder = (*FakeRecorder)(nil)
)

// Discard records nothing: the recorder of a component given none.
var Discard EventRecorder = discard{}

type discard struct{}

func (discard) Event(api.Object, string, string, string)          {}
func (discard) Eventf(api.Object, string, string, string, ...any) {}

// FakeRecorder keeps the events recorded, for tests, as client-go's
// FakeRecorder does: each one is "<type> <reason> <message>". It is safe
// for concurrent use; the zero value is ready.
type FakeRecorder struct {
	mu     sync.Mutex
	events []string
}

// Event keeps "<eventType> <reason> <message>".
func (f *FakeRecorder) Event(obj api.Object, eventType, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, eventType+" "+reason+" "+message)
}

// Eventf is Event with the message formatted by fmt.Sprintf.
func (f *FakeRecorder) Eventf(obj api.Object, eventType, reason, messageFmt string, args ...any) {
	f.Event(obj, eventType, reason, fmt.Sprintf(messageFmt, args...))
}

// Events returns the events kept so far, oldest first.
func (f *FakeRecorder) Events() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

// WithReason returns the events kept so far whose reason is reason.
func (f *FakeRecorder) WithReason(reason string) []string {
	var out []string
	for _, e := range f.Events() {
		if _, rest, ok := strings.Cut(e, " "); ok && strings.HasPrefix(rest, reason+" ") {
			out = append(out, e)
		}
	}
	return out
}

// Package record records Events about objects, for controllers, the
// scheduler and the kubelet to tell what they did ("Created pod web-x7k2p",
// "0/3 nodes are available"): the part of client-go's tools/record that
// writes core/v1 Events.
//
// Design, one line per part:
//
//   - recorder.go: Recorder, Eventf queues an event and Run's goroutine
//     writes it (client-go's recorder, broadcaster and event sink in one).
//   - correlator.go: which events are repeats to count and which are similar
//     enough to combine (client-go's EventCorrelator, without its spam
//     filter).
//   - loss.go: the log's summary of the events dropped, one line per
//     interval.
//   - lru.go: the bounded cache the correlator remembers with.
//   - fake.go: the EventRecorder interface, Discard (records nothing) and
//     FakeRecorder for tests.
//
// Properties:
//
//   - Eventf never blocks and never fails: it builds the Event and queues
//     it. When the queue is full (the server is down or slow, or events come
//     faster than it takes them) the event is dropped and counted in
//     Dropped. The log says how many were dropped in one warning per 10s,
//     however many there were, never one line per event.
//   - Events are written in the order they were recorded, by one goroutine,
//     the one calling Run; nothing is written before Run, and Run stops when
//     its context is done. Events still queued then wait for a later Run;
//     call WaitIdle before cancelling Run to flush them.
//   - An Event is named "<object name>.<unix nanoseconds, 16 hex digits>",
//     unique per recorder, and lives in the object's namespace; events about
//     cluster-scoped objects (nodes, namespaces) live in "default".
//   - A repeat (same object, type, reason, message and source as an event
//     this recorder wrote) does not create an Event: the existing one is
//     patched with count+1, the new lastTimestamp and the message. If that
//     Event has gone meanwhile (expired, deleted) it is created again with
//     the count so far. The recorder remembers
//     the last 4096 distinct events; an older repeat makes a new Event.
//   - Similar events (the same but for the message) that bring a tenth
//     different message, each within 10 minutes of the previous, are
//     combined: from then on they count on one Event whose message is
//     "(combined from similar events): " and the latest message.
//   - A write the server answered with an error is not retried (the answer
//     is final); one the server could not be reached for, or was asked to
//     repeat (429, 503, 504), is retried every RetryInterval, 12 tries at
//     most.
//   - A Recorder is safe for concurrent use. The object passed to Eventf is
//     only read, during the call.
//
// A Recorder only remembers what it wrote itself: two recorders (two
// processes) recording the same thing make two Events, as in Kubernetes.
package record

// Package clock is minictl's one source of time: every component that reads
// the time or waits (the workqueue, the informer's reflector, the event
// recorder, leader election, the controllers, the scheduler, the kubelet)
// takes a Clock, so that a test can hold time still and move it by hand.
//
// Design, one line per part:
//
//   - clock.go: Clock and Timer, and Real, the wall clock.
//   - fake.go: Fake, a clock that moves only when told to.
//
// Properties:
//
//   - A nil Clock is never used: every Options that takes one defaults nil
//     to Real{}.
//   - A Fake's timers fire only while the fake time is being moved (Step,
//     SetTime), never on their own, and each fires at most once.
//   - Both are safe for concurrent use.
package clock

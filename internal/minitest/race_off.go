//go:build !race

package minitest

const raceEnabled = false

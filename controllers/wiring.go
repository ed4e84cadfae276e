package controllers

// knownControllers is the manager's table: every controller it can run,
// wired explicitly to what it needs.
var knownControllers = []descriptor{}

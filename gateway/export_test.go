package gateway

// HidesNatsHeader is hidesNatsHeader, for the external tests.
var HidesNatsHeader = hidesNatsHeader

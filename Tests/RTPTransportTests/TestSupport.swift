@_exported import TestSupport

func randomBytes(_ count: Int, _ rng: inout SeededGenerator) -> [UInt8] { rng.bytes(count) }

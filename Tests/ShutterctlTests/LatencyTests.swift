// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import shutterctl

@Suite("Latency figures")
struct LatencyTests {
    @Test("nearest-rank percentiles")
    func percentiles() {
        let v: [Int64] = (1...100).map { Int64($0) * 10 }.shuffled()
        #expect(Latency.percentile(50, of: v) == 500)
        #expect(Latency.percentile(90, of: v) == 900)
        #expect(Latency.percentile(99, of: v) == 990)
        #expect(Latency.percentile(100, of: v) == 1000)
        #expect(Latency.percentile(50, of: [7]) == 7)
        #expect(Latency.percentile(99, of: [3, 1, 2]) == 3)
        #expect(Latency.percentile(50, of: []) == nil)
        #expect(
            Latency.row("kernel->client", [100, 200, 300]) == "kernel->client            200      300      300      300"
        )
    }

    @Test("the histogram has a power-of-two bucket a line, empty ones between included")
    func histogram() {
        let lines = Latency.histogram([10, 70, 70, 70, 300], width: 6)
        #expect(
            lines == [
                "       0 - 63       us |##     1",
                "      64 - 127      us |###### 3",
                "     128 - 255      us |       0",
                "     256 - 511      us |##     1",
            ])
        #expect(Latency.histogram([]).isEmpty)
    }
}

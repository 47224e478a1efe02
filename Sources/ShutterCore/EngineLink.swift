// SPDX-License-Identifier: Apache-2.0

extension Engine {
    /// The device's object changed (link state, battery): later occurrences carry `record`,
    /// which has the same handle. When BlueZ says the device is no longer connected, its
    /// held keys are cancelled with reason `disconnected`, as its release will not come, and
    /// kept as held down in the kernel (`DeviceState.downUnseen`).
    package func replaceRecord(_ record: DeviceRecord, now: Int64) -> [Occurrence] {
        guard let state = devices[record.handle] else { return [] }
        let wasConnected = state.record.info.connected
        state.record = record
        guard wasConnected != false, record.info.connected == false else { return [] }
        state.downUnseen += state.held.map(\.code)
        return cancelAll(handle: record.handle, reason: .disconnected, now: now)
    }
}

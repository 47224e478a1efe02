// SPDX-License-Identifier: Apache-2.0
import ShutterCore
import ShutterSys

// A client's turn: reading its requests, within its bounds, into values for the owner.
extension ClientHub {
    func clientReady(_ client: Client, _ events: UInt32) {
        if events & EventLoop.writable != 0 && client.waitingWritable {
            // Watched for readability alone again; a write that is still short watches it
            // for writability once more.
            client.waitingWritable = false
            loop.modify(client.fd, events: EventLoop.readable)
            owner.writable(client.id)
        }
        guard clients[client.id] === client else { return }
        if client.closing && events & EventLoop.hangup != 0 {
            closeClient(client, why: "disconnected before reading its last messages")
            return
        }
        // A client with a backlog is served in its turn, after the others.
        if events & (EventLoop.readable | EventLoop.hangup) != 0 && !client.inBacklog { serve(client) }
    }

    /// One turn of each client with a backlog; true while some backlog is left.
    func serveBacklog() -> Bool {
        guard !backlog.isEmpty else { return false }
        let round = backlog
        backlog.removeAll(keepingCapacity: true)
        for client in round {
            client.inBacklog = false
            if clients[client.id] === client { serve(client) }
        }
        return !backlog.isEmpty
    }

    /// One turn of a client: its request lines handed to the owner, the socket read at most
    /// once, up to `linesPerTurn` lines or `bytesPerTurn` bytes. What is left waits for the
    /// next round, so one client's flood delays the others by one turn at most. Lines are
    /// split in linear time (LineReader), blank ones included. Stops when the client is
    /// closing (a request's answer may close it).
    func serve(_ client: Client) {
        var lines = 0
        var bytes = 0
        var didRead = false
        while clients[client.id] === client && !client.closing {
            if lines >= linesPerTurn || bytes >= bytesPerTurn {
                client.inBacklog = true
                backlog.append(client)
                loop.workLeft = true
                return
            }
            if let item = client.reader.next() {
                switch item {
                case .tooLong:
                    owner.request(
                        .failure(
                            RequestError(.lineTooLong, "request line longer than \(maxRequestLine) bytes; closing")),
                        from: client.id)
                case .line(let line):
                    lines += 1
                    bytes += line.count + 1
                    if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
                    owner.request(RequestLine.parse(line), from: client.id)
                }
                continue
            }
            if didRead { return }
            didRead = true
            let n: Int?
            do {
                n = try Sys.recv(client.fd, into: &readBuffer)
            } catch {
                closeClient(client, why: error.errno == Errno.ECONNRESET ? "disconnected" : error.description)
                return
            }
            guard let n else { return }
            if n == 0 {
                closeClient(client, why: "disconnected")
                return
            }
            client.reader.append(readBuffer[0..<n])
        }
    }
}

internal import NIOCore
internal import RosterServices

/// `ResponsePacing` for the HTTP/2 transport: a no-op task on each of the group's event loops.
///
/// A response writer hands each message to its connection's loop with `execute`, and a loop
/// runs its tasks in order, so once a task submitted after the write has run, the loop has
/// taken the message: passed it to the stream, which reports itself unwritable if the socket
/// or the client's window is full, and then the next write waits. The group has a loop per
/// core and visiting each costs a few microseconds, far less than sending a 64 KiB message
/// takes.
struct EventLoopPacing: ResponsePacing {
  let group: any EventLoopGroup

  func drained() async {
    let visits = self.group.makeIterator().map { $0.submit {} }
    for visit in visits { try? await visit.get() }
  }
}

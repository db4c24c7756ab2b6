public import GRPCCore
public import RosterLocks

/// Something of one call that can be cancelled: its `RPCCancellationHandle`, or its task.
public protocol CancellableHandle: Sendable {
  func cancel()
}

extension ServerContext.RPCCancellationHandle: CancellableHandle {}
extension Task: CancellableHandle {}

/// The cancellation of one call's handle, which may be signalled before the handle exists (the
/// event loop, before the call's task has made its `RPCCancellationHandle`; the default deadline,
/// before the task is attached): a signal that comes first is kept and passed on at once.
///
/// Not generic: the handle is held as `any CancellableHandle`. A generic class's deinit is never
/// specialized, and looked up the metadata of its locked state at every call (three lookups in
/// the runtime's cache, seen under callgrind).
public final class CallCancellation: Sendable {
  @usableFromInline
  enum State {
    case waiting
    case attached(any CancellableHandle)
    case cancelled
  }
  @usableFromInline
  let state = Locked(State.waiting)

  @inlinable
  public init() {}

  @inlinable
  public func attach(_ handle: some CancellableHandle) {
    let cancelNow = self.state.withLock { state -> Bool in
      if case .cancelled = state { return true }
      state = .attached(handle)
      return false
    }
    if cancelNow { handle.cancel() }
  }

  @inlinable
  public func cancel() {
    let handle = self.state.withLock { state -> (any CancellableHandle)? in
      defer { state = .cancelled }
      if case .attached(let handle) = state { return handle }
      return nil
    }
    handle?.cancel()
  }
}

/// A call that runs in a task of its own (the fast path's, the Connect bridge's), as its
/// `ServerContext.transportSpecific`: its task, to cancel, and when it arrived. A type of the
/// services' module, so `CallControlInterceptor` finds it with a cast to the type rather than
/// to a protocol, whose conformance is looked up at each call.
public struct CallTask: CallTaskCancelling, CallArrival {
  public let task = CallCancellation()
  public let arrived: ContinuousClock.Instant

  public init(arrived: ContinuousClock.Instant) {
    self.arrived = arrived
  }

  public func cancelCallTask() {
    self.task.cancel()
  }
}

package dev.informersidecar.client;

import java.util.ArrayDeque;
import java.util.concurrent.Executor;
import java.util.logging.Level;

/**
 * Runs tasks one at a time, in submission order, on an underlying executor
 * (which may be a pool): the ordering the handlers' contract promises whatever
 * executor the application supplies. A task that throws is logged and the
 * next one runs. {@link #awaitBelow} lets the producer wait while too many
 * tasks are pending (back-pressure on a slow handler instead of unbounded
 * memory). Thread-safe.
 */
final class SerialExecutor implements Executor {
  private final Executor delegate;
  private final String name;
  private final ArrayDeque<Runnable> tasks = new ArrayDeque<>(); // guarded by this
  private boolean running; // guarded by this
  private Thread drainer; // guarded by this: the thread running tasks

  SerialExecutor(Executor delegate, String name) {
    this.delegate = delegate;
    this.name = name;
  }

  @Override
  public void execute(Runnable task) {
    boolean start;
    synchronized (this) {
      tasks.add(task);
      start = !running;
      running = true;
    }
    if (start) {
      delegate.execute(this::drain);
    }
  }

  /** Blocks while more than {@code limit} tasks are pending. */
  synchronized void awaitBelow(int limit) throws InterruptedException {
    while (tasks.size() > limit) {
      wait(100);
    }
  }

  /**
   * Blocks until no task is pending or running, or the timeout passed; at
   * once when called from a task (it would wait for itself).
   */
  synchronized boolean awaitIdle(java.time.Duration timeout) throws InterruptedException {
    if (Thread.currentThread() == drainer) {
      return false;
    }
    long deadline = System.nanoTime() + timeout.toNanos();
    while (running) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      java.util.concurrent.TimeUnit.NANOSECONDS.timedWait(this, left);
    }
    return true;
  }

  private void drain() {
    while (true) {
      Runnable task;
      synchronized (this) {
        task = tasks.poll();
        drainer = task == null ? null : Thread.currentThread();
        if (task == null) {
          running = false;
          notifyAll();
          return;
        }
        notifyAll();
      }
      try {
        task.run();
      } catch (RuntimeException | Error e) {
        StreamHealth.LOG.log(Level.WARNING, name + ": handler threw", e);
      }
    }
  }
}

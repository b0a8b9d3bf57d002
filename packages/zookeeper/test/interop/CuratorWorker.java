// A Curator client that contends for one ZooKeeper path, driven by lines on stdin; run by
// spawn-interop-worker.ts with `java -cp <Curator's jars> CuratorWorker.java`.
//
// Arguments: <connect string> <path> <id> <recipe: lock | latch | selector> <session timeout ms>
//
// Lines in:  acquire <timeout ms> [path [recipe]] | release | stop
//            (a path after the timeout: this acquire contends on that path, not <path>; a
//            recipe after it: with that recipe, not <recipe>; one JVM serves every step)
// Lines out: ready | acquired <node name> <czxid> | timeout | released | stopped | error <message>
//
// stdin closing (the test process died) ends the process: the session closes with it.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.data.Stat;

public class CuratorWorker {
  static final Object OUT = new Object();

  static void say(String line) {
    synchronized (OUT) {
      System.out.println(line);
      System.out.flush();
    }
  }

  static String oneLine(Throwable e) {
    String text = e.getClass().getSimpleName() + ": " + e.getMessage();
    return text.replace('\n', ' ');
  }

  /** An InterProcessMutex that tells the path of the node it holds. */
  static final class Mutex extends InterProcessMutex {
    Mutex(CuratorFramework client, String path) {
      super(client, path);
    }

    String heldPath() {
      return getLockPath();
    }
  }

  final CuratorFramework client;
  final String path;
  final String id;
  final String recipe;
  /** The recipe of the current or last acquire: what `release` gives up. */
  String heldRecipe;
  /** One InterProcessMutex per lock path, made on first use; `mutex` is the last acquired. */
  final Map<String, Mutex> mutexes = new HashMap<>();
  Mutex mutex;
  LeaderLatch latch;
  LeaderSelector selector;
  CountDownLatch leadershipDone;
  CountDownLatch leadershipEnded;
  String heldNode;

  CuratorWorker(CuratorFramework client, String path, String id, String recipe) {
    this.client = client;
    this.path = path;
    this.id = id;
    this.recipe = recipe;
  }

  String name(String fullPath) {
    return fullPath.substring(fullPath.lastIndexOf('/') + 1);
  }

  void announce(String fullPath) throws Exception {
    heldNode = fullPath;
    Stat stat = client.checkExists().forPath(fullPath);
    say("acquired " + name(fullPath) + " " + (stat == null ? "0" : Long.toString(stat.getCzxid())));
  }

  /** Blocks until held (announcing it) or until the timeout (saying so). */
  void acquire(long timeoutMs, String lockPath, String recipe) throws Exception {
    heldRecipe = recipe;
    switch (recipe) {
      case "lock": {
        mutex = mutexes.computeIfAbsent(lockPath, p -> new Mutex(client, p));
        if (!mutex.acquire(timeoutMs, TimeUnit.MILLISECONDS)) {
          say("timeout");
          return;
        }
        announce(mutex.heldPath());
        return;
      }
      case "latch": {
        latch = new LeaderLatch(client, lockPath, id);
        latch.start();
        if (!latch.await(timeoutMs, TimeUnit.MILLISECONDS)) {
          latch.close();
          latch = null;
          say("timeout");
          return;
        }
        announce(latch.getOurPath());
        return;
      }
      case "selector": {
        CountDownLatch elected = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(1);
        CountDownLatch ended = new CountDownLatch(1);
        leadershipDone = done;
        leadershipEnded = ended;
        selector =
            new LeaderSelector(
                client,
                lockPath,
                new LeaderSelectorListenerAdapter() {
                  @Override
                  public void takeLeadership(CuratorFramework c) throws Exception {
                    elected.countDown();
                    try {
                      done.await();
                    } finally {
                      ended.countDown();
                    }
                  }
                });
        selector.setId(id);
        selector.start();
        if (!elected.await(timeoutMs, TimeUnit.MILLISECONDS)) {
          selector.close();
          selector = null;
          say("timeout");
          return;
        }
        announce(ownNodeByData(lockPath));
        return;
      }
      default:
        throw new IllegalArgumentException("unknown recipe " + recipe);
    }
  }

  /** The child of `path` whose data is our id (LeaderSelector's node holds its id). */
  String ownNodeByData(String path) throws Exception {
    byte[] want = id.getBytes(StandardCharsets.UTF_8);
    List<String> children = client.getChildren().forPath(path);
    for (String child : children) {
      String full = path + "/" + child;
      try {
        byte[] data = client.getData().forPath(full);
        if (java.util.Arrays.equals(data, want)) return full;
      } catch (org.apache.zookeeper.KeeperException.NoNodeException gone) {
        // A contender left meanwhile.
      }
    }
    throw new IllegalStateException("no node of " + path + " holds id " + id);
  }

  void release() throws Exception {
    switch (heldRecipe == null ? recipe : heldRecipe) {
      case "lock":
        mutex.release();
        break;
      case "latch":
        latch.close();
        latch = null;
        break;
      case "selector":
        leadershipDone.countDown();
        leadershipEnded.await();
        selector.close();
        selector = null;
        break;
      default:
        break;
    }
    // Report only once the node is gone, so "released" means the next contender may go.
    if (heldNode != null) {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (client.checkExists().forPath(heldNode) != null) {
        if (System.nanoTime() > deadline) throw new IllegalStateException(heldNode + " was not deleted");
        Thread.sleep(5);
      }
      heldNode = null;
    }
    say("released");
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 5) {
      say("error usage: CuratorWorker <connect> <path> <id> <lock|latch|selector> <session timeout ms>");
      System.exit(2);
    }
    String connect = args[0];
    String path = args[1];
    String id = args[2];
    String recipe = args[3];
    int sessionTimeoutMs = Integer.parseInt(args[4]);
    CuratorFramework client =
        CuratorFrameworkFactory.newClient(connect, sessionTimeoutMs, 15_000, new RetryNTimes(100, 100));
    CuratorWorker worker = new CuratorWorker(client, path, id, recipe);
    // Acquires block, so they run off the reader thread (stdin closing must still end us).
    // InterProcessMutex is owned by the thread that acquired it: every acquire and release
    // runs on this one thread, in the order the commands came, after the connection.
    ExecutorService recipeThread = Executors.newSingleThreadExecutor();
    recipeThread.execute(
        () -> {
          try {
            client.start();
            if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
              say("error no connection to " + connect + " within 30 s");
              System.exit(1);
            }
            say("ready");
          } catch (InterruptedException e) {
            System.exit(1);
          }
        });
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      String[] words = line.trim().split(" ");
      switch (words[0]) {
        case "acquire": {
          long timeoutMs = words.length > 1 ? Long.parseLong(words[1]) : 60_000;
          String lockPath = words.length > 2 ? words[2] : path;
          String stepRecipe = words.length > 3 ? words[3] : recipe;
          recipeThread.execute(() -> run(() -> worker.acquire(timeoutMs, lockPath, stepRecipe)));
          break;
        }
        case "release":
          recipeThread.execute(() -> run(worker::release));
          break;
        case "stop":
          client.close();
          say("stopped");
          System.exit(0);
          break;
        default:
          say("error unknown command " + words[0]);
      }
    }
    // stdin closed: the test process is gone.
    System.exit(0);
  }

  interface Step {
    void run() throws Exception;
  }

  static void run(Step step) {
    try {
      step.run();
    } catch (Exception e) {
      say("error " + oneLine(e));
    }
  }
}

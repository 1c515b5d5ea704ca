// A resident nodetool: one JVM runs many NodeTool commands, so a repair batch pays Java's start-up once
// instead of once per command (a nodetool JVM costs ~1 s of CPU before it says anything).
//
// Protocol on stdin/stdout, one line per message, fields separated by TAB (nodetool arguments hold no
// TAB or newline; the Python side refuses them):
//   request   RUN <id> <arg>...      run `nodetool <arg>...` in its own thread
//             CANCEL <id>            close that command's JMX connections and interrupt it
//   answers   OUT <id> <line>        a line the command printed
//             END <id> <exit code>   the command finished
// Closing stdin ends the server. System.exit from NodeTool (it exits when it cannot connect) ends only the
// command that called it, with its exit code.
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.Permission;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.cassandra.tools.INodeProbeFactory;
import org.apache.cassandra.tools.NodeProbe;
import org.apache.cassandra.tools.NodeTool;
import org.apache.cassandra.tools.Output;

public final class RingwardNodetoolServer {
    private static final PrintStream ANSWERS = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
    private static final Map<String, Command> RUNNING = new ConcurrentHashMap<>();
    private static final ThreadLocal<Command> CURRENT = new ThreadLocal<>();

    /** An exit requested by a command thread: it ends that command, not the server. */
    private static final class CommandExit extends SecurityException {
        final int status;
        CommandExit(int status) {
            super("nodetool exited with " + status);
            this.status = status;
        }
    }

    private static final class Command {
        final String id;
        final List<NodeProbe> probes = new CopyOnWriteArrayList<>();
        volatile Thread thread;
        volatile boolean cancelled;
        volatile Integer exitStatus; // set when NodeTool called System.exit
        LineStream stream;

        Command(String id) {
            this.id = id;
        }

        void cancel() {
            cancelled = true;
            for (NodeProbe probe : probes) {
                try {
                    probe.close();
                } catch (IOException | RuntimeException ignored) {
                    // the connection is going away either way
                }
            }
            Thread running = thread;
            if (running != null) running.interrupt();
        }
    }

    /** Creates NodeTool's JMX connections and remembers them, so CANCEL can close them. */
    private static final class TrackingProbeFactory implements INodeProbeFactory {
        public NodeProbe create(String host, int port) throws IOException {
            return track(new NodeProbe(host, port));
        }

        public NodeProbe create(String host, int port, String username, String password) throws IOException {
            return track(new NodeProbe(host, port, username, password));
        }

        private static NodeProbe track(NodeProbe probe) {
            Command command = CURRENT.get();
            if (command != null) command.probes.add(probe);
            return probe;
        }
    }

    /** Every line a command prints goes out at once as an OUT message. */
    private static final class LineStream extends OutputStream {
        private final String id;
        private final ByteArrayOutputStream line = new ByteArrayOutputStream();
        private boolean silenced;

        LineStream(String id) {
            this.id = id;
        }

        @Override
        public synchronized void write(int b) {
            if (b == '\n') flushLine();
            else if (b != '\r') line.write(b);
        }

        @Override
        public synchronized void flush() {
        }

        synchronized void flushLine() {
            if (!silenced) answer("OUT", id, line.toString(StandardCharsets.UTF_8));
            line.reset();
        }

        /** After System.exit NodeTool prints its own stack trace of the trapped exit: not the command's output. */
        synchronized void silence() {
            if (line.size() > 0) flushLine();
            silenced = true;
        }

        synchronized void finish() {
            if (line.size() > 0) flushLine();
        }
    }

    /**
     * System.out for the whole JVM: what a command's thread prints goes to that command's output, anything else to
     * stderr (stdout is the protocol's). Some commands (5.0.9's Get/SetAutoRepairConfig) print to a System.out they
     * keep in a static field at class load, not to NodeTool's Output; routing by thread gives them their output too.
     */
    private static final class ThreadRoutedOut extends OutputStream {
        private final PrintStream fallback;

        ThreadRoutedOut(PrintStream fallback) {
            this.fallback = fallback;
        }

        @Override
        public void write(int b) {
            Command command = CURRENT.get();
            if (command != null && command.stream != null) command.stream.write(b);
            else fallback.write(b);
        }

        @Override
        public void flush() {
            fallback.flush();
        }
    }

    private static void answer(String kind, String id, String text) {
        synchronized (ANSWERS) {
            ANSWERS.print(kind + "\t" + id + "\t" + text + "\n");
            ANSWERS.flush();
        }
    }

    @SuppressWarnings("removal")
    private static void trapExits() {
        System.setSecurityManager(new SecurityManager() {
            @Override
            public void checkPermission(Permission perm) {
            }

            @Override
            public void checkPermission(Permission perm, Object context) {
            }

            @Override
            public void checkExit(int status) {
                Command command = CURRENT.get();
                if (command == null) return;
                command.exitStatus = status;
                command.stream.silence();
                throw new CommandExit(status);
            }
        });
    }

    private static void run(Command command, String[] args) {
        LineStream stream = new LineStream(command.id);
        command.stream = stream;
        CURRENT.set(command);
        PrintStream printer = new PrintStream(stream, true, StandardCharsets.UTF_8);
        int status;
        try {
            status = new NodeTool(new TrackingProbeFactory(), new Output(printer, printer)).execute(args);
        } catch (CommandExit exit) {
            status = exit.status;
        } catch (Throwable error) {
            printer.println("error: " + error);
            status = 2;
        } finally {
            CURRENT.remove();
        }
        printer.flush();
        stream.finish();
        if (command.exitStatus != null) status = command.exitStatus;
        if (command.cancelled && status == 0) status = 130;
        RUNNING.remove(command.id);
        answer("END", command.id, Integer.toString(status));
    }

    public static void main(String[] argv) throws IOException {
        System.setOut(new PrintStream(new ThreadRoutedOut(System.err), true, StandardCharsets.UTF_8));
        trapExits();
        BufferedReader requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        answer("READY", "-", "");
        String request;
        while ((request = requests.readLine()) != null) {
            String[] fields = request.split("\t", -1);
            if (fields.length >= 2 && fields[0].equals("RUN")) {
                Command command = new Command(fields[1]);
                String[] args = Arrays.copyOfRange(fields, 2, fields.length);
                RUNNING.put(command.id, command);
                Thread thread = new Thread(() -> run(command, args), "nodetool-" + command.id);
                command.thread = thread;
                thread.setDaemon(true);
                thread.start();
            } else if (fields.length == 2 && fields[0].equals("CANCEL")) {
                Command command = RUNNING.get(fields[1]);
                if (command != null) command.cancel();
            }
        }
        for (Command command : RUNNING.values()) command.cancel();
        Runtime.getRuntime().halt(0);
    }
}

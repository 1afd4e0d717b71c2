package org.blockrnn;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Runs model files through {@link Model}, for tests/python/test_model_languages.py, which compares
 * the results with the source framework's outputs on every model of the model zoo (not a JUnit
 * test: a main class in the test jar).
 *
 * <pre>
 * java -Dblockrnn.jni=libblockrnn_jni.so -cp blockrnn.jar:blockrnn-tests.jar \
 *     org.blockrnn.ModelRun MODEL X T B LENGTHS OUT_DIR [MODEL X T B LENGTHS OUT_DIR ...]
 * </pre>
 *
 * <p>X is x [T, B, I] as raw little-endian values of the model's dtype; LENGTHS is seq_lengths
 * [B] as raw little-endian int64, or "-" for none. Writes OUT_DIR/y.bin (raw, the model's dtype)
 * and one OUT_DIR/&lt;state name&gt;.bin per final state ({@link Model#stateNames()}). Several
 * models in one call spare the test a JVM start per model.
 */
public final class ModelRun {
  private ModelRun() {}

  public static void main(String[] args) throws IOException {
    if (args.length == 0 || args.length % 6 != 0) {
      System.err.println(
          "usage: ModelRun MODEL X T B LENGTHS|- OUT_DIR [MODEL X T B LENGTHS OUT_DIR ...]");
      System.exit(2);
    }
    for (int a = 0; a < args.length; a += 6) {
      runOne(args[a], Paths.get(args[a + 1]), Long.parseLong(args[a + 2]),
          Long.parseLong(args[a + 3]), args[a + 4], Paths.get(args[a + 5]));
    }
  }

  private static void runOne(String modelPath, Path xPath, long t, long b, String lengthsPath,
      Path outDir) throws IOException {
    try (Model model = Model.load(modelPath)) {
      long[] xShape = {t, b, model.inputSize()};
      ByteBuffer xBytes = read(xPath);
      Tensor x;
      if (model.dtype().equals("float")) {
        float[] data = new float[xBytes.remaining() / Float.BYTES];
        xBytes.asFloatBuffer().get(data);
        x = FloatTensor.of(data, xShape);
      } else {
        double[] data = new double[xBytes.remaining() / Double.BYTES];
        xBytes.asDoubleBuffer().get(data);
        x = DoubleTensor.of(data, xShape);
      }
      LongTensor lengths = null;
      if (!lengthsPath.equals("-")) {
        ByteBuffer bytes = read(Paths.get(lengthsPath));
        long[] data = new long[bytes.remaining() / Long.BYTES];
        bytes.asLongBuffer().get(data);
        lengths = LongTensor.of(data, b);
      }
      Model.Result result = model.forward(x, lengths, null);
      write(outDir.resolve("y.bin"), result.output());
      String[] names = model.stateNames();
      Tensor[] states = result.states();
      for (int k = 0; k < names.length; ++k) {
        write(outDir.resolve(names[k] + ".bin"), states[k]);
      }
    }
  }

  private static ByteBuffer read(Path path) throws IOException {
    return ByteBuffer.wrap(Files.readAllBytes(path)).order(ByteOrder.LITTLE_ENDIAN);
  }

  private static void write(Path path, Tensor tensor) throws IOException {
    ByteBuffer bytes;
    if (tensor instanceof FloatTensor) {
      float[] data = ((FloatTensor) tensor).data();
      bytes = ByteBuffer.allocate(data.length * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
      bytes.asFloatBuffer().put(data);
    } else {
      double[] data = ((DoubleTensor) tensor).data();
      bytes = ByteBuffer.allocate(data.length * Double.BYTES).order(ByteOrder.LITTLE_ENDIAN);
      bytes.asDoubleBuffer().put(data);
    }
    Files.write(path, bytes.array());
  }
}

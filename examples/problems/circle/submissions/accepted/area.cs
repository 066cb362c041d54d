using System;
using System.Globalization;

class Area
{
    static void Main()
    {
        double r = double.Parse(Console.ReadLine().Trim(), CultureInfo.InvariantCulture);
        Console.WriteLine((Math.PI * r * r).ToString("R", CultureInfo.InvariantCulture));
    }
}
